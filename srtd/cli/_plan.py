from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from srtd.cli._inputs import Inputs, PlanChoice, plan_options, read_inputs
from srtd.cli._main import cli
from srtd.cli._verdict import echo_warnings, located_plan, plan_warnings
from srtd.errors import PlanError, RecipeError, UsageError

if TYPE_CHECKING:
    from srtd.unit import Plan


@cli.command()
@click.argument("recipe", type=click.Path(path_type=Path))
@plan_options
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON (the contract in docs/plan.md).")
@click.option("--graph", type=click.Choice(["mermaid", "dot"]), help="The dependency graph.")
@click.option("--sbatch", "as_sbatch", is_flag=True, help="The sbatch wrapper script that execs `srtd run`.")
@click.option("--all", "every", is_flag=True, help="Every variant / sweep combination of the file.")
@click.option(
    "--slurm", is_flag=True, help="Plan for Slurm from outside an allocation (on --nodes, or synthesized ones)."
)
def plan(
    recipe: Path, choice: PlanChoice, as_json: bool, graph: str | None, as_sbatch: bool, every: bool, slurm: bool
) -> None:
    """Show what `srtd run` would do with RECIPE: nodes, units, commands, probes, tiers.

    Where `srtd run` would run it: inside a Slurm allocation as Slurm steps, otherwise (or
    with --local) on this machine.  --slurm, --nodes and --sbatch plan for Slurm from
    outside one.  Offline: no network and no Slurm are needed.
    """
    from srtd.plan import dot, mermaid

    if sum((as_json, graph is not None, as_sbatch)) > 1:
        raise UsageError("choose one of --json, --graph and --sbatch")
    inputs = read_inputs(recipe, choice, slurm=slurm or as_sbatch)  # a batch script is for Slurm
    if len(inputs.recipes) > 1 and not every:
        names = ", ".join(r.variant or "?" for r in inputs.recipes)
        raise UsageError(
            f"{recipe} holds {len(inputs.recipes)} recipes ({names}); choose one with --variant or use --all"
        )
    plans = _plans(inputs)
    if as_json:
        if every:
            click.echo(json.dumps([p.to_json() for p in plans], indent=2))
        else:
            click.echo(plans[0].dumps(), nl=False)
    elif graph is not None:
        for p in plans:
            click.echo(mermaid(p) if graph == "mermaid" else dot(p), nl=False)
    elif as_sbatch:
        _echo_sbatch(inputs, plans)
    else:
        _render(plans)


def _plans(inputs: Inputs) -> list[Plan]:
    """Every recipe's plan, its warnings said, with each Slurm unit's exact srun line."""
    from srtd.launch import with_srun_lines

    plans = [
        located_plan(
            loaded,
            inputs.cluster,
            nodes=inputs.nodes,
            job_id=inputs.job_id,
            local=inputs.local,
            log_dir=inputs.log_dir,
            port_offset=inputs.port_offset or 0,
        )
        for loaded in inputs.recipes
    ]
    # one warning for the whole sweep, not one per recipe
    echo_warnings([w for p, loaded in zip(plans, inputs.recipes, strict=True) for w in plan_warnings(loaded, p)])
    return [with_srun_lines(p) for p in plans]


def _echo_sbatch(inputs: Inputs, plans: list[Plan]) -> None:
    from srtd.attach import srtd_command
    from srtd.plan import sbatch_script

    for p, loaded in zip(plans, inputs.recipes, strict=True):
        args = [str(Path(loaded.file).resolve())]
        if loaded.variant:
            args += ["--variant", loaded.variant]
        if inputs.cluster_file:
            args += ["--cluster-config", str(inputs.cluster_file.resolve())]
        try:
            script = sbatch_script(p, args, srtd=srtd_command())
        except PlanError as err:
            raise RecipeError([loaded.locate(problem) for problem in err.problems]) from None
        click.echo(script, nl=False)


def _render(plans: list[Plan]) -> None:
    from rich.console import Console

    from srtd.cli._plan_view import render_plan

    console = Console(
        no_color=bool(os.environ.get("NO_COLOR")) or not sys.stdout.isatty(),
        highlight=False,
        width=None if sys.stdout.isatty() else 200,
    )
    for i, p in enumerate(plans):
        if i:
            console.print()
        render_plan(p, console)
