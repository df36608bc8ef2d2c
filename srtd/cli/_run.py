from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from srtd._files import write_under
from srtd.cli._inputs import PlanChoice, plan_options, read_inputs, runs_locally
from srtd.cli._main import cli
from srtd.cli._verdict import located_plan
from srtd.errors import FileRefused, LaunchError, PlanError, UsageError

if TYPE_CHECKING:
    from srtd.launch import PortClaim, SlurmLauncher
    from srtd.supervisor import Console, Preflight
    from srtd.unit import Plan


def _load_plan_file(path: Path) -> tuple[Plan, str]:
    """The saved plan, and its text (written to the log dir as it is when nothing changes it)."""
    from srtd._files import PLAN_LIMIT, read_text_back
    from srtd.unit import Plan, ShapeError

    try:
        text = read_text_back(path, limit=PLAN_LIMIT, error=UsageError)
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None
    try:
        plan = Plan.loads(text)
    except ShapeError as err:  # "where: why", as pydantic located it before
        raise PlanError(f"{path}: not a plan written by srtd plan --json ({err})") from None
    if escaping := plan.outside_log_dir():
        raise PlanError([f"{path}: {line}" for line in escaping])
    return plan, text


def _local_job_id() -> str:
    return "local-" + time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


def _prepare_log_dir(plan: Plan, text: str | None = None) -> Path:
    """The log directory, made, with the plan in it (`text`: the plan file's own, when it runs as saved).

    Rendering a plan of 1,000 units takes about 0.3 s here, and every unit's start waits for it.
    """
    log_dir = Path(plan.log_dir)
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LaunchError(f"cannot create the log directory {log_dir}: {err.strerror}") from None
    if os.path.lexists(log_dir / "events.jsonl"):
        raise LaunchError(f"{log_dir} already holds a job's journal; give another --log-dir or --job-id")
    if not os.access(log_dir, os.W_OK):
        raise LaunchError(f"the log directory {log_dir} is not writable")
    try:
        write_under(log_dir, log_dir / "plan.json", plan.dumps() if text is None else text, error=FileRefused)
    except FileRefused:  # it names the file and why
        raise
    except OSError as err:
        raise LaunchError(f"cannot write {log_dir / 'plan.json'}: {err.strerror}") from None
    return log_dir


def _local_path() -> None:
    # srtd's own programs (srtd-toy-worker, ...) live next to its interpreter; make
    # them reachable even when its venv is not activated, without shadowing the
    # user's python3 (which may be the one with Dynamo or vLLM installed).
    here = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if here not in parts:
        os.environ["PATH"] = os.pathsep.join([*parts, here])


def _export_source_dir() -> None:
    # srt-slurm's batch script exports SRTCTL_SOURCE_DIR and every step inherits it; recipes
    # name files under it (`bash ${SRTCTL_SOURCE_DIR}/configs/...`).  srtd's units inherit
    # srtd's environment, so the variable set here reaches each of them (docs/recipe.md).
    from srtd._source import SOURCE_DIR_VAR, source_dir

    os.environ[SOURCE_DIR_VAR] = source_dir()


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


def _run_console(*, as_json: bool, plain: bool) -> Console:
    """`--json`: the journal's lines on stdout.  On a terminal: the attach view of the whole run
    (docs/attach.md).  `--plain`, or into a pipe: one line per event on stderr, and nothing drawn
    in place (on a terminal the lines console would draw its startup table in place)."""
    from srtd.supervisor import JsonConsole, TerminalConsole

    if as_json:
        return JsonConsole()
    if plain or not sys.stderr.isatty():
        return TerminalConsole(tty=False)
    from srtd.attach import RunView
    from srtd.supervisor import LiveConsole

    return LiveConsole(RunView())


def _job_plan(
    recipe: Path, choice: PlanChoice, local: bool, slurm_job: str | None
) -> tuple[Plan, str | None, PortClaim | None]:
    """The plan `srtd run` supervises: a saved plan as it is, or the recipe's, planned now;
    with the saved plan's text while nothing has changed it."""
    claim, text = None, None
    if recipe.suffix == ".json":
        plan, text = _load_plan_file(recipe)
        if plan.local and not local:
            raise UsageError(f"{recipe} was planned for this machine; run it with --local, or plan it for Slurm")
        if local and not plan.local:
            raise UsageError(f"{recipe} was planned for Slurm; plan it with --local to run it on this machine")
    else:
        plan, claim = _plan_recipe(recipe, choice, local)
        if claim is not None and claim.moved is not None:
            click.echo(f"srtd: ports offset by {plan.port_offset}: {claim.moved}", err=True)
    if not local:
        from srtd.launch import with_srun_lines

        plan, text = with_srun_lines(plan, slurm_job), None  # plan.json shows each unit's exact srun line
    return plan, text, claim


def _preflight(cluster_config: Path | None, *, saved_local: bool) -> Preflight:
    """The node checks before launch: the cluster's budget and GPU query, the engines' memory flags.

    A saved plan run on this machine checks with the defaults and without the engines' memory
    share: the settings and the engines' table would load the recipe models for one
    machine's check (docs/nodes.md)."""
    from srtd.supervisor import Preflight

    if saved_local:
        return Preflight()
    from srtd.cluster import load_cluster
    from srtd.engines import all_rows

    flags = tuple(sorted({row.memory_fraction_flag for row in all_rows() if row.memory_fraction_flag}))

    cluster, _ = load_cluster(cluster_config)
    return Preflight(cluster.preflight_seconds, cluster.gpu_query_command, flags)


def _slurm_launcher(
    plan: Plan, recipe: Path, slurm_job: str, cluster_config: Path | None, log_path: Path
) -> SlurmLauncher:
    from srtd.cluster import load_cluster
    from srtd.launch import SlurmLauncher, slurm_addresses, slurmd_targets

    addresses = plan.addresses
    if recipe.suffix == ".json":
        # A saved plan may have been made offline (node names as addresses): probes
        # still go to what Slurm says each node's address is.
        addresses = {**addresses, **slurm_addresses(list(plan.allocation))[0]}
    cluster, _ = load_cluster(cluster_config)
    check = cluster.node_check_interval_seconds
    return SlurmLauncher(
        job_id=slurm_job,
        log_dir=log_path,
        addresses=addresses,
        early_warning=plan.teardown.early_warning_seconds,
        slurmd=slurmd_targets(list(plan.allocation)) if check > 0 else None,
        node_check_interval=check,
        node_lost_after=cluster.node_lost_seconds,
    )


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
    from srtd.attach import serve
    from srtd.launch import LocalLauncher
    from srtd.reporting import power_telemetry, publish_results, status_service
    from srtd.supervisor import run as supervise

    if choice.nodes_text:
        raise UsageError("--nodes is for `srtd plan`; `srtd run` uses the allocation it runs in (or this machine)")
    slurm_job = os.environ.get("SLURM_JOB_ID") or None
    local = runs_locally(choice)
    _export_source_dir()
    plan, text, claim = _job_plan(recipe, choice, local, slurm_job)
    log_path = _prepare_log_dir(plan, text)
    del text  # not held while the job runs: a plan of 1,000 units is 1 MiB of text
    _local_path()
    console = _run_console(as_json=as_json, plain=plain)
    # the attach socket (srtd attach, ps, stop, restart, tail); status reporting
    # power telemetry: sampled while the job runs, checked before the publishers see the results
    power_service, check_power = power_telemetry()
    services = [serve, status_service(), power_service]
    after = [check_power, publish_results]  # reporting.publishers, once the results have passed the gate
    checks = _preflight(choice.cluster_config, saved_local=local and recipe.suffix == ".json")
    if local:
        try:
            return supervise(
                plan,
                LocalLauncher(),
                log_dir=log_path,
                console=console,
                services=services,
                after_job=after,
                preflight=checks,
            )
        finally:
            if claim is not None:
                claim.release()
    assert slurm_job is not None
    launcher = _slurm_launcher(plan, recipe, slurm_job, choice.cluster_config, log_path)
    return supervise(
        plan,
        launcher,
        log_dir=log_path,
        console=console,
        services=services,
        explain=launcher.explain,
        after_job=after,
        preflight=checks,
    )
