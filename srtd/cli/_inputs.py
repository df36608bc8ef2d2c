"""What `srtd plan` and `srtd run` both read: recipe, variant, cluster settings, nodes."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from srtd._value import value_class
from srtd.errors import UsageError

if TYPE_CHECKING:  # the heavy modules load when a command runs, not for `srtd --help`
    from srtd.cluster import Cluster
    from srtd.recipe import LoadedRecipe

F = TypeVar("F", bound=Callable[..., Any])


_OPTIONS = [
    click.option("--variant", help="Override variant or sweep combination to use (a name or a glob)."),
    click.option(
        "--nodes", "nodes_text", help="Host list to plan on, e.g. 'gpu-[01-08]' (default: Slurm's, or synthesized)."
    ),
    click.option("--cluster-config", type=click.Path(path_type=Path), help="srtslurm.yaml to read."),
    click.option(
        "--local",
        is_flag=True,
        help="Run on this machine: every node is here, one port space (the default outside a Slurm allocation).",
    ),
    click.option("--job-id", help="Job id used in paths (default: $SLURM_JOB_ID, or 'local')."),
    click.option("--log-dir", help="Log directory (default: the recipe's output.log_dir, or outputs/<job>/logs)."),
    click.option(
        "--port-offset",
        type=click.IntRange(min=0),
        help="Add N to every port srtd chooses (default: cluster port_offset; a local run takes a free block).",
    ),
]


@value_class
class PlanChoice:
    """What the plan-input options chose, as given on the command line."""

    variant: str | None = None
    nodes_text: str | None = None
    cluster_config: Path | None = None
    local: bool = False
    job_id: str | None = None
    log_dir: str | None = None
    port_offset: int | None = None


def plan_options(func: F) -> F:
    """The options that choose a plan's inputs, handed to the command as one `choice`."""
    names = [f.name for f in fields(PlanChoice)]

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        choice = PlanChoice(**{name: kwargs.pop(name) for name in names})
        return func(*args, choice=choice, **kwargs)

    for option in reversed(_OPTIONS):
        command = option(command)
    return cast("F", command)


@value_class(frozen=False)
class Inputs:
    recipes: list[LoadedRecipe]
    cluster: Cluster
    cluster_file: Path | None
    nodes: list[str] | None
    job_id: str
    local: bool
    log_dir: str | None
    port_offset: int | None  # None: not pinned (a local run picks a free block; a plan shows 0)


def check_job_id(job: str, source: str) -> None:
    """A job id names directories (outputs/<job>/logs), so it is one safe path component."""
    from srtd.unit import unsafe_name

    if unsafe_name(job):
        raise UsageError(f"{source}: {job!r} is not a job id: it may not be empty or hold `/`, `..` or controls")


def runs_locally(choice: PlanChoice, *, slurm: bool = False) -> bool:
    """Where the job runs: the one rule of `srtd run`, and so of `srtd plan`, which shows it.

    `--local` runs on this machine; inside a Slurm allocation (`$SLURM_JOB_ID`) the units are
    Slurm steps; outside one, on this machine.  `slurm` (plan's `--slurm`, `--sbatch`) and
    `--nodes` plan for Slurm from outside an allocation.
    """
    if choice.local and choice.nodes_text:
        raise UsageError("--local plans for this machine; --nodes does not apply")
    if choice.local and slurm:
        raise UsageError("--local plans for this machine; --slurm and --sbatch plan for Slurm")
    if choice.local:
        return True
    return not (slurm or choice.nodes_text or os.environ.get("SLURM_JOB_ID"))


def read_inputs(recipe: Path, choice: PlanChoice, *, default_job_id: str = "local", slurm: bool = False) -> Inputs:
    from srtd.cluster import load_cluster
    from srtd.recipe import load_recipes
    from srtd.topology import expand, job_port_offset, slurm_nodes

    local = runs_locally(choice, slurm=slurm)
    nodes_text, job_id = choice.nodes_text, choice.job_id
    cluster, cluster_file = load_cluster(choice.cluster_config)
    recipes = load_recipes(recipe, variant=choice.variant)
    nodes = expand(nodes_text) if nodes_text else (None if local else slurm_nodes())
    job = job_id or os.environ.get("SLURM_JOB_ID") or default_job_id
    check_job_id(job, "--job-id" if job_id else "$SLURM_JOB_ID")
    offset = job_port_offset(choice.port_offset, cluster.port_offset, job)
    return Inputs(recipes, cluster, cluster_file, nodes, job, local, choice.log_dir, offset)
