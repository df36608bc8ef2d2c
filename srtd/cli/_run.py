from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from srtd.cli import is_saved_plan
from srtd.cli._inputs import PlanChoice, plan_options, read_inputs, runs_locally
from srtd.cli._main import cli
from srtd.cli._supervise import Handover, add_own_programs_to_path, export_source_dir, hand_over, prepare_log_dir
from srtd.cli._verdict import located_plan
from srtd.errors import LaunchError, UsageError

if TYPE_CHECKING:
    from srtd.launch import PortClaim
    from srtd.unit import Plan


def _local_job_id() -> str:
    return "local-" + time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


def _plan_recipe(recipe: Path, choice: PlanChoice, local: bool) -> tuple[Plan, PortClaim | None]:
    """The plan of one recipe for this machine, or for the allocation srtd runs in.

    A local run without a pinned offset takes the first free block of ports, and the
    claim that keeps other local jobs off it while this one runs.
    """
    from srtd.launch import claim_port_block, slurm_addresses

    inputs = read_inputs(recipe, replace(choice, nodes_text=None, local=local), default_job_id=_local_job_id())
    if len(inputs.recipes) > 1:
        names = ", ".join(r.variant or "?" for r in inputs.recipes)
        raise UsageError(f"{recipe} holds {len(inputs.recipes)} recipes ({names}); choose one with --variant")
    addresses: dict[str, str] = {}
    shared = False
    if not local:
        if not inputs.nodes:
            raise LaunchError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: cannot tell the allocation's nodes")
        # Looked up once per job: every {node_ip}, probe target and endpoint uses these.
        addresses, shared = slurm_addresses(inputs.nodes)

    def build(where: str | None, offset: int) -> Plan:
        return located_plan(
            inputs.recipes[0],
            inputs.cluster,
            nodes=inputs.nodes,
            job_id=inputs.job_id,
            local=local,
            log_dir=where,
            addresses=addresses,
            shared_ports=shared,
            port_offset=offset,
        )

    # Resolve the log dir first so every path in the plan is absolute.
    where = str(Path(build(choice.log_dir, 0).log_dir).resolve())
    if local and inputs.port_offset is None:
        return claim_port_block(lambda offset: build(where, offset))
    return build(where, inputs.port_offset or 0), None


def _settings(handover: Handover, cluster_config: Path | None) -> None:
    """What the supervisor's process takes from the cluster's settings and the engines' table:
    the node checks (budget, GPU query, the engines' memory flags) and, under Slurm, the node watch.

    A saved plan run on this machine checks with the defaults and without the engines' memory
    share: the settings and the engines' table would load the recipe models for one
    machine's check (docs/nodes.md)."""
    if handover.local and handover.saved:
        return
    from srtd.cluster import load_cluster
    from srtd.engines import all_rows

    flags = sorted({row.memory_fraction_flag for row in all_rows() if row.memory_fraction_flag})
    cluster, _ = load_cluster(cluster_config)
    handover.preflight = {
        "budget_seconds": cluster.preflight_seconds,
        "gpu_query": cluster.gpu_query_command,
        "memory_flags": flags,
    }
    handover.node_check = (cluster.node_check_interval_seconds, cluster.node_lost_seconds)


@cli.command()
@click.argument("recipe", type=click.Path(path_type=Path))
@plan_options
@click.option("--json", "as_json", is_flag=True, help="Every event as a JSON line on stdout (the journal format).")
@click.option("--plain", is_flag=True, help="One line per event on a terminal too, as into a pipe.")
def run(recipe: Path, choice: PlanChoice, as_json: bool, plain: bool) -> int:
    """Supervise the job RECIPE describes (or a plan saved with `srtd plan --json`).

    Inside a Slurm allocation each unit is a named Slurm step; with --local, or
    outside an allocation, everything runs on this machine.  Logs, the event
    journal (events.jsonl) and the plan go to the log directory.  SIGTERM, SIGINT,
    SIGHUP and SIGUSR1 stop the job tier by tier; a second Ctrl-C kills at once.
    """
    from srtd import _early_signals

    _early_signals.catch()  # a stop signal from now on waits for the supervisor instead of killing srtd
    if choice.nodes_text:
        raise UsageError("--nodes is for `srtd plan`; `srtd run` uses the allocation it runs in (or this machine)")
    slurm_job = os.environ.get("SLURM_JOB_ID") or None
    local = runs_locally(choice)
    export_source_dir()
    saved = is_saved_plan(str(recipe))
    handover = Handover(str(recipe), saved, local, slurm_job, as_json=as_json, plain=plain)
    claim = None
    try:
        if not saved:
            plan, claim = _plan_recipe(recipe, choice, local)
            if claim is not None and claim.moved is not None:
                click.echo(f"srtd: ports offset by {plan.port_offset}: {claim.moved}", err=True)
            if not local:
                from srtd.launch import with_srun_lines

                plan = with_srun_lines(plan, slurm_job)  # plan.json shows each unit's exact srun line
            handover.plan = str(prepare_log_dir(plan) / "plan.json")
            del plan  # not held until the exec: a plan of 1,000 units is megabytes of objects
        add_own_programs_to_path()
        _settings(handover, choice.cluster_config)
    except BaseException:
        if claim is not None:
            claim.release()
        raise
    return hand_over(handover, claim)  # the job runs in a process without click, the recipe models or pydantic
