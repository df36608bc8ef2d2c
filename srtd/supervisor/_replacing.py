"""Replacing a lost node under a running job: the runtime half of `_replace.py`.

The launcher ends every attempt on a lost node as unreachable (`ExitStatus.lost`, with
the node).  The first such attempt to reach its restart decision asks `Replacer.on_lost`;
the node is decided once:

- no spare left, or it is the node srtd runs on: a `node` event says so (and what to
  set), and the attempt goes on to the restart policy as before: the job ends as it
  did without spares;
- otherwise the plan becomes `replace_node(plan, lost, spare)`; every moved and restarted
  runner takes its new unit and is *displaced* (a dependant waits for it as for a unit
  that is not ready) until its new attempt starts; the restarted ones that still run are
  interrupted; a terminal unit that was running (the benchmark) is restarted once every
  moved and restarted unit is ready again, its interrupted results set aside.  Each comes
  back in dependency order through the normal path: stop, backoff 0, wait for its
  dependencies, launch.

Two `node` job events (docs/events.md, "Node events"): `lost` at the decision, `replaced`
once every moved and restarted unit is ready again (`seconds`: from the decision).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Coroutine
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc

from srtd.events import UnitState
from srtd.results import resolve
from srtd.supervisor._attempt import AttemptEnd
from srtd.unit import Condition, Edge

if TYPE_CHECKING:
    from srtd.supervisor._job import Job
    from srtd.supervisor._replace import Replacement
    from srtd.supervisor._results import ResultsWatch
    from srtd.supervisor._unit import UnitRunner

NO_SPARE_HINT = "set resources.spare_nodes: 1 in the recipe to replace a lost node"


def node_detail(node: str, what: str, **facts: Any) -> dict[str, Any]:
    """The journal's `detail.node` (docs/events.md, "Node events")."""
    fact: dict[str, Any] = {
        "node": node,
        "what": what,
        "check": None,
        "evidence": None,
        "spare": None,
        "units": [],
        "seconds": None,
    }
    fact.update(facts)
    return {"node": fact}


def interrupted_path(path: Path, number: int) -> Path:
    """Where an interrupted attempt's results are kept: `<results>.interrupted.<n>`."""
    return path.with_name(f"{path.name}.interrupted.{number}")


class Replacer:
    """The job's lost nodes and what became of them."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.gone: dict[str, Replacement | None] = {}  # lost node -> its replacement (None: none)
        self.replacements: list[Replacement] = []
        self.not_replaced: dict[str, str] = {}  # lost node -> why it was not replaced

    def on_lost(self, runner: UnitRunner, node: str, reason: str) -> str | None:
        """`runner`'s attempt ended because `node` is lost.  None: it is launched again on the spare;
        else why the node is not replaced ("" when that is no news: the job is stopping)."""
        if node not in self.gone:
            self.gone[node] = self._decide(node, reason)
        replacement = self.gone[node]
        if replacement is not None and runner.name in replacement.touched:
            return None
        return self.not_replaced.get(node, "")

    def _decide(self, node: str, reason: str) -> Replacement | None:
        from srtd.supervisor._replace import choose_spare, decide  # a node was lost: loaded then

        job = self.job
        on_node = [u.name for u in job.plan.units if node in u.nodes and not u.on_teardown]
        if job.stopping:
            return None  # the job ends anyway: its teardown says what became of the node's units
        spare = choose_spare(job.plan, node, set(self.gone))
        if spare is None:
            why = (
                "it runs srtd itself"
                if job.plan.allocation and node == job.plan.allocation[0]
                else f"no spare node is left: {NO_SPARE_HINT}"
            )
            self.not_replaced[node] = f"not replaced: {why}"
            text = f"node {node} lost and not replaced: {why}"
            self._emit(text, node_detail(node, "lost", evidence=reason, units=on_node))
            return None
        from srtd.topology import replace_node  # loads only when a node is replaced

        replacement = decide(job.plan, replace_node(job.plan, node, spare), node, spare)
        text = f"node {node} lost: {', '.join(replacement.moved) or 'nothing'} move to {spare}"
        if replacement.restarted:
            text += f"; {', '.join(replacement.restarted)} restart with its address"
        self._emit(text, node_detail(node, "lost", evidence=reason, spare=spare, units=list(replacement.moved)))
        self._apply(replacement)
        return replacement

    def _apply(self, replacement: Replacement) -> None:
        job = self.job
        job.plan = replacement.plan
        self.replacements.append(replacement)
        new = {u.name: u for u in replacement.plan.units}
        why = f"node {replacement.lost} replaced by {replacement.spare}"
        for name in replacement.touched:
            runner = job.runners[name]
            runner.unit = new[name]
            if not runner.final:
                runner.displaced = True
        back = tuple(
            Edge(unit=n, condition=Condition.READY) for n in replacement.order if not job.runners[n].unit.terminal
        )
        for name in replacement.moved:
            runner = job.runners[name]
            if runner.unit.terminal and not runner.final:
                runner.rejoin = back  # a moved benchmark, too, waits until the job serves again
        for name in (*replacement.restarted, *replacement.disrupted):
            runner = job.runners[name]
            if not runner.unit.terminal:
                runner.interrupt(AttemptEnd("replaced", f"restarted: {why}", delay=0.0))
            elif runner.live and runner.unit.on_disruption == "fail":
                runner.interrupt(AttemptEnd("disrupted", f"{why} while it ran (on_disruption: fail)"))
            elif runner.live:
                runner.rejoin = back  # it runs again once every moved and restarted unit is ready
                runner.interrupt(AttemptEnd("replaced", f"restarted once the job serves again: {why} while it ran"))
        started = job.clock.now()
        job.in_background(lambda: self._served_again(replacement, started))

    async def _served_again(self, replacement: Replacement, started: float) -> None:
        """Emit `replaced` once every moved and restarted unit is ready again."""
        runners = [self.job.runners[n] for n in replacement.touched]
        while not all(_back(r) for r in runners):
            if self.job.stopping:
                return
            await self.job.changed()
        seconds = round(self.job.clock.now() - started, 3)
        text = f"node {replacement.lost} replaced by {replacement.spare}: served again after {seconds:g} s"
        detail = node_detail(
            replacement.lost, "replaced", spare=replacement.spare, units=list(replacement.moved), seconds=seconds
        )
        self._emit(text, detail)

    def _emit(self, reason: str, detail: dict[str, Any]) -> None:
        journal = self.job.journal
        journal.emit(None, journal.view.state, reason=reason, detail=detail)

    def set_aside(self, runner: UnitRunner, number: int, why: str) -> Path | None:
        """A benchmark restarted across a replacement: what its interrupted attempt wrote is kept
        beside as `<results>.interrupted.<n>`, with `<...>.why` saying why.  Where, or None."""
        spec = runner.unit.results
        if spec is None:
            return None
        path = resolve(spec, self.job.log_dir)
        target = interrupted_path(path, number)
        try:
            os.replace(path, target)
        except OSError:
            return None  # nothing measured yet
        with contextlib.suppress(OSError):
            target.with_name(target.name + ".why").write_text(why + "\n", encoding="utf-8")
        return target


class ReplacingPort:
    """What a `Job` answers its units about lost nodes (`JobPort.node_lost`, `set_aside`), and its
    `Replacer`: a base of `Job`, so the job's own class stays small."""

    _tg: anyio.abc.TaskGroup | None
    _results: ResultsWatch
    runners: dict[str, UnitRunner]

    @cached_property
    def replacer(self) -> Replacer:
        return Replacer(cast("Job", self))

    def node_lost(self, unit: str, node: str, reason: str) -> str | None:
        return self.replacer.on_lost(self.runners[unit], node, reason)

    def set_aside(self, unit: str, number: int, why: str) -> None:
        target = self.replacer.set_aside(self.runners[unit], number, why)
        lost = self.replacer.replacements[-1].lost if self.replacer.replacements else "?"
        self._results.restarted(unit, lost, None if target is None else str(target))

    def in_background(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `task` beside the units until the job ends."""
        if self._tg is not None:
            self._tg.start_soon(task)


def _back(runner: UnitRunner) -> bool:
    return runner.final or (runner.state is UnitState.READY and not runner.displaced)


__all__ = ["NO_SPARE_HINT", "Replacer", "interrupted_path", "node_detail"]
