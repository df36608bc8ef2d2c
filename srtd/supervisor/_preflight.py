"""Preflight: every node of the job checked at once before any unit launches (docs/nodes.md).

Each node runs the check program (`srtd/launch/_node_check.py`, by its path, with `-I -S`)
through the launcher (one Slurm step on that node; locally a process here) with what the
plan gives it: its GPU indices and ports, the log directory, the largest share of GPU
memory its engines ask for.  The checks share one time budget.  A node that fails is
replaced by the first spare that passed (`srtd.topology.replace_node`) before anything
launches; with no spare left the job ends at once with `EXIT_PREFLIGHT`, naming the node,
the check and its evidence.

The supervisor knows no engine: which argv flag carries an engine's memory share comes in
`Preflight.memory_flags`, from the engine registry, through `srtd run`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from srtd._files import write_under
from srtd._value import value_class
from srtd.errors import EXIT_PREFLIGHT, FileRefused
from srtd.events import JobState
from srtd.launch import Launcher, ToolRun
from srtd.supervisor._end import End
from srtd.supervisor._groups import Groups
from srtd.supervisor._journal import Journal
from srtd.supervisor._preflight_argv import (
    CHECK_PROGRAM,
    Preflight,
    busy_nodes,
    check_argv,
    memory_fraction,
    nodes_to_check,
)
from srtd.supervisor._unit import UnitRunner
from srtd.unit import Plan

if TYPE_CHECKING:
    from srtd.supervisor._job import Job

__all__ = ["CHECK_PROGRAM", "Preflight", "check_argv", "checked_nodes", "memory_fraction", "verdict_of"]

NODE_KEY = "node"  # the journal's `detail.node` (docs/events.md, node events)


@value_class
class NodeVerdict:
    node: str
    ok: bool
    check: str | None = None
    evidence: str | None = None
    seconds: float = 0.0
    notes: tuple[str, ...] = ()


def verdict_of(node: str, run: ToolRun, seconds: float, budget: float) -> NodeVerdict:
    """The node's verdict from the check's output: its last JSON line."""
    if run.code is None and not run.missing:
        return NodeVerdict(node, False, "answer", f"no answer within {budget:g} s", seconds)
    for line in reversed(run.out.splitlines()):
        try:
            said: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        if isinstance(said, dict) and "ok" in said:
            notes = tuple(str(n) for n in said.get("notes") or ())
            return NodeVerdict(node, bool(said["ok"]), said.get("check"), said.get("evidence"), seconds, notes)
    return NodeVerdict(node, False, "answer", f"the check did not run: {run.said()}", seconds)


async def check_nodes(plan: Plan, launcher: Launcher, settings: Preflight, nodes: Sequence[str]) -> list[NodeVerdict]:
    """Every node's verdict, all at once, within the budget."""
    verdicts: dict[str, NodeVerdict] = {}
    started = time.monotonic()

    async def one(node: str) -> None:
        run = await launcher.run_check(node, check_argv(settings, plan, node), timeout=settings.budget_seconds)
        verdicts[node] = verdict_of(node, run, time.monotonic() - started, settings.budget_seconds)

    async with anyio.create_task_group() as tg:
        for node in nodes:
            tg.start_soon(one, node)
    return [verdicts[n] for n in nodes]


def _units_on(plan: Plan, node: str) -> list[str]:
    return [u.name for u in plan.units if node in u.nodes]


def _emit(journal: Journal, reason: str, **facts: Any) -> None:
    base: dict[str, Any] = {"what": None, "check": None, "evidence": None, "spare": None, "units": [], "seconds": None}
    journal.emit(None, journal.view.state, reason=reason, detail={NODE_KEY: base | facts})


def _journal_verdict(journal: Journal, plan: Plan, verdict: NodeVerdict) -> None:
    units, seconds = _units_on(plan, verdict.node), round(verdict.seconds, 3)
    if verdict.ok:
        notes = f" ({'; '.join(verdict.notes)})" if verdict.notes else ""
        reason = f"node {verdict.node} passed preflight in {verdict.seconds:.1f} s{notes}"
        _emit(journal, reason, node=verdict.node, what="preflight-passed", units=units, seconds=seconds)
        return
    reason = f"node {verdict.node} failed preflight: {verdict.check}: {verdict.evidence}"
    facts = {"check": verdict.check, "evidence": verdict.evidence}
    _emit(journal, reason, node=verdict.node, what="preflight-failed", units=units, seconds=seconds, **facts)


def no_spare_reason(verdict: NodeVerdict) -> str:
    return (
        f"node {verdict.node} failed preflight ({verdict.check}: {verdict.evidence}) and no spare node is left;"
        " set resources.spare_nodes (or the cluster's spare_nodes) to hold spares, or preflight: false to run anyway"
    )


async def run_preflight(plan: Plan, launcher: Launcher, settings: Preflight, journal: Journal) -> Plan | End:
    """The plan to run (failing nodes replaced by spares), or the job's end when a node has no spare."""
    busy = busy_nodes(plan)
    verdicts = await check_nodes(plan, launcher, settings, nodes_to_check(plan))
    for verdict in verdicts:
        _journal_verdict(journal, plan, verdict)
    good = tuple(v.node for v in verdicts if v.ok and v.node in plan.spares)
    if good != plan.spares:
        plan = replace(plan, spares=good)  # a spare that failed is never used
    for verdict in verdicts:
        if verdict.ok or verdict.node not in busy:
            continue
        if not plan.spares:
            detail = {NODE_KEY: {"node": verdict.node, "check": verdict.check, "evidence": verdict.evidence}}
            return End(JobState.FAILED, EXIT_PREFLIGHT, no_spare_reason(verdict), extra=detail)
        spare, units = plan.spares[0], _units_on(plan, verdict.node)
        from srtd.topology import replace_node  # the topology loads only when a node is replaced

        plan = replace_node(plan, verdict.node, spare)
        reason = f"node {verdict.node} replaced by spare {spare} before launch: {', '.join(units) or 'no units'}"
        facts = {"check": verdict.check, "evidence": verdict.evidence, "spare": spare, "units": units}
        _emit(journal, reason, node=verdict.node, what="replaced", **facts)
    return plan


async def checked_nodes(job: Job, settings: Preflight | None) -> End | None:
    """Preflight of `job`'s plan: None to go on (failing nodes replaced), else the job's end.

    A stop request meanwhile ends it with the job's stopped end; nothing has launched then.
    """
    if settings is None or not job.plan.preflight:
        return None
    outcome: Plan | End | None = None
    async with anyio.create_task_group() as tg:

        async def on_stop() -> None:
            await job.stop.requested.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(on_stop)
        outcome = await run_preflight(job.plan, job.launcher, settings, job.journal)
        tg.cancel_scope.cancel()
    if outcome is None:
        return job.stopped()
    if isinstance(outcome, End):
        job.console.failure(outcome.reason)
        return outcome
    if outcome is not job.plan:  # the same plan when every node passed: no runner is rebuilt
        _replan(job, outcome)
    return None


def _replan(job: Job, plan: Plan) -> None:
    """Units moved to spares before launch: new runners, and a plan.json that shows what runs."""
    job.plan = plan
    job.runners = {u.name: UnitRunner(job, u, job.log_dir / u.log) for u in plan.units}
    job.groups = Groups(job.runners.values(), job.clock)
    with contextlib.suppress(OSError, FileRefused):
        write_under(job.log_dir, job.log_dir / "plan.json", plan.dumps(), error=FileRefused)
