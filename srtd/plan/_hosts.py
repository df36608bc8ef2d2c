"""Host steps: the recipe's `host_setup` as units, one per node, before and after the job.

`host_setup.commands` becomes one `host_setup_<node>` unit per targeted node, the job's
first tier: every unit that waits for nothing else waits for every one of them to have
ended (`Condition.ENDED`), so nothing of the job launches before each node's setup is
over.  A setup step is critical unless `ignore_failure`: its failure ends the job (its
dependants never launch); with `ignore_failure` it is a recorded, non-critical failure
and the job goes on.  `host_setup.teardown` becomes one `host_teardown_<node>` unit per
node with `on_teardown`: the supervisor launches them after every teardown tier is down,
also when the job failed or was cancelled.  Each step is bounded by `timeout_seconds`
(`run_timeout`: a hung hook is stopped and fails with one line).

The hooks are the recipe's `host_setup`, or else the cluster's `default_host_setup`: a
recipe that writes the block replaces the cluster's whole (an empty block turns them off).

They run on the bare host, never in a container, as srtctl's do: the commands are the
recipe's own shell, joined with `&&` into one `bash -c` (the user's shell on purpose);
what srtd adds (the environment) is quoted by the launcher like every unit's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from srtd.context import PlanContext
from srtd.layout import Place
from srtd.recipe import HostSetupConfig
from srtd.unit import Condition, Edge, Unit, UnitKind

SETUP_PHASE = "host_setup"
TEARDOWN_PHASE = "host_teardown"
UPLOAD_PHASE = "postprocess"  # the log upload after everything else (`_postprocess`)
KILL_GRACE = 5.0  # seconds a hook stopped at its timeout gets between SIGTERM and SIGKILL


def host_setup(ctx: PlanContext) -> HostSetupConfig:
    """The job's hooks: the recipe's block when it writes one, else the cluster's default."""
    if "host_setup" in ctx.recipe.model_fields_set or ctx.cluster.default_host_setup is None:
        return ctx.recipe.host_setup
    return ctx.cluster.default_host_setup


def host_nodes(ctx: PlanContext) -> tuple[str, ...]:
    """The nodes `host_setup.nodes` names: `workers` (workers and pools) or `all` (head and infra too)."""
    return ctx.nodes.compute if host_setup(ctx).nodes == "workers" else job_nodes(ctx)


def job_nodes(ctx: PlanContext) -> tuple[str, ...]:
    """Every node of the job, each once: head, infra, then the worker and pool nodes."""
    return tuple(dict.fromkeys((ctx.nodes.head, ctx.nodes.infra, *ctx.nodes.compute)))


def host_units(ctx: PlanContext, last_tier: int) -> tuple[list[Unit], list[Unit]]:
    """(setup steps, teardown steps): one per targeted node for each command list that is set."""
    cfg = host_setup(ctx)
    if not cfg.commands and not cfg.teardown:
        return [], []
    nodes = host_nodes(ctx)
    if not nodes:
        ctx.warn("host_setup.nodes is 'workers' but the job has no worker nodes: no host step runs")
        return [], []
    setup = [_step(ctx, SETUP_PHASE, node, cfg.commands) for node in nodes] if cfg.commands else []
    teardown = [
        replace(_step(ctx, TEARDOWN_PHASE, node, cfg.teardown), on_teardown=True, tier=last_tier + 1) for node in nodes
    ]
    return setup, teardown if cfg.teardown else []


def _step(ctx: PlanContext, phase: str, node: str, commands: Sequence[str]) -> Unit:
    cfg = host_setup(ctx)
    return host_step(
        ctx,
        f"{phase}_{node}",
        node,
        " && ".join(commands),
        phase=phase,
        env=dict(ctx.recipe.environment.items()),
        critical=phase == SETUP_PHASE and not cfg.ignore_failure,
        timeout=float(cfg.timeout_seconds),
    )


def host_step(
    ctx: PlanContext,
    name: str,
    node: str,
    script: str,
    *,
    phase: str = SETUP_PHASE,
    env: dict[str, str] | None = None,
    critical: bool,
    timeout: float,
) -> Unit:
    """One step on `node`'s bare host: `bash -c script`, srtd's job variables (and `env`) around it."""
    return Unit(
        name=name,
        kind=UnitKind.HOST,
        phase=phase,
        nodes=(node,),
        argv=("bash", "-c", script),
        # on the bare host the log directory is the host's path, never the container's /logs
        env={**ctx.job_env(), "SRTD_LOG_DIR": ctx.log_dir, **(env or {})},
        log=ctx.log(name, Place.JOB),  # srtctl keeps host steps' output at the top of logs/
        critical=critical,
        run_timeout=timeout,
        terminate_timeout=KILL_GRACE,
    )


def with_host_steps(units: Sequence[Unit], setup: Sequence[Unit], teardown: Sequence[Unit]) -> list[Unit]:
    """The setup steps first, every unit that waits for nothing else waiting for all of them,
    the teardown steps last."""
    edges = tuple(Edge(unit=s.name, condition=Condition.ENDED) for s in setup)
    body = [u if u.after or not edges else replace(u, after=edges) for u in units]
    return [*setup, *body, *teardown]


def phases_with_hosts(phases: tuple[str, ...], units: Sequence[Unit]) -> tuple[str, ...]:
    """The plan's phases, with the phases of the steps around the job when the plan has them:
    the host setup before; the host teardown, then the log upload (`_postprocess`), after."""
    present = {u.phase for u in units}
    before = tuple(p for p in (SETUP_PHASE,) if p in present)
    after = tuple(p for p in (TEARDOWN_PHASE, UPLOAD_PHASE) if p in present)
    return (*before, *phases, *after)
