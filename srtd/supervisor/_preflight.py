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
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from srtd._files import write_under
from srtd.errors import EXIT_PREFLIGHT, FileRefused
from srtd.events import JobState
from srtd.launch import Launcher, ToolRun
from srtd.supervisor._groups import Groups
from srtd.supervisor._journal import Journal
from srtd.supervisor._outcome import End
from srtd.supervisor._unit import UnitRunner
from srtd.unit import Plan, Unit, UnitKind

if TYPE_CHECKING:
    from srtd.supervisor._job import Job

# Run by its path with `-I -S`: it needs nothing of srtd's and no site-packages, so it
# starts in half the time `-m` takes (9 ms against 20), and each job's start waits for it.
CHECK_PROGRAM = str(Path(__file__).resolve().parents[1] / "launch" / "_node_check.py")
NODE_KEY = "node"  # the journal's `detail.node` (docs/events.md, node events)


@dataclass(frozen=True)
class Preflight:
    """How `srtd run` checks the nodes: the cluster's settings and the engines' memory flags."""

    budget_seconds: float = 60.0
    gpu_query: str = "nvidia-smi"
    memory_flags: tuple[str, ...] = ()
    python: str = field(default_factory=lambda: sys.executable)


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    ok: bool
    check: str | None = None
    evidence: str | None = None
    seconds: float = 0.0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeNeeds:
    gpus: tuple[int, ...]  # () with `gpu_check`: every GPU of the node
    ports: tuple[int, ...]
    fraction: float
    gpu_check: bool


def memory_fraction(argv: Sequence[str], flags: Sequence[str]) -> float:
    """The share of GPU memory `argv` asks for with one of `flags` (`--f 0.8` or `--f=0.8`); 0: none."""
    found = 0.0
    for i, word in enumerate(argv):
        for flag in flags:
            value = word[len(flag) + 1 :] if word.startswith(flag + "=") else None
            if word == flag and i + 1 < len(argv):
                value = argv[i + 1]
            try:
                found = max(found, float(value)) if value is not None else found
            except ValueError:
                continue
    return found


def _needs(units: Sequence[Unit], flags: Sequence[str]) -> NodeNeeds:
    workers = [u for u in units if u.kind is UnitKind.WORKER]
    whole = any(not u.gpus for u in workers)
    gpus = () if whole else tuple(sorted({g for u in workers for g in u.gpus}))
    ports = tuple(sorted({p for u in units for p in u.ports.values() if p}))
    fraction = max((memory_fraction(u.argv, flags) for u in workers), default=0.0)
    return NodeNeeds(gpus, ports, fraction, bool(workers))


def node_needs(plan: Plan, node: str, flags: Sequence[str]) -> NodeNeeds:
    """What the plan gives `node`; for a spare, what any node gives (it may take over any)."""
    if node in plan.spares:
        return _needs(plan.units, flags)
    return _needs([u for u in plan.units if node in u.nodes], flags)


def check_argv(settings: Preflight, plan: Plan, node: str) -> list[str]:
    needs = node_needs(plan, node, settings.memory_flags)
    return [
        settings.python,
        "-I",
        "-S",
        CHECK_PROGRAM,
        f"--node={node}",
        f"--log-dir={plan.log_dir}",
        f"--ports={','.join(map(str, needs.ports))}",
        f"--gpus={','.join(map(str, needs.gpus))}",
        f"--memory-fraction={needs.fraction:g}",
        f"--gpu-query={settings.gpu_query if needs.gpu_check else ''}",
    ]


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
    busy = [n for n in plan.allocation if any(n in u.nodes for u in plan.units)]
    verdicts = await check_nodes(plan, launcher, settings, [*busy, *plan.spares])
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
