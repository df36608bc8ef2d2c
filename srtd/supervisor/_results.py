"""A benchmark's results, read through the plan's `ResultsSpec`, journaled as they appear, gated.

The supervisor knows no benchmark: a unit's `results` (plan data) names the reader and
the path, and `srtd.results` does the reading.  While the unit runs, the path is looked
at once per `poll_seconds` (a stat; read only when it changed) and each new point becomes
a journal event of the unit (its state repeated, the point in `detail.result`,
docs/events.md), so `srtd attach` shows a sweep's points as the tool writes them.  Once
the unit has ended, a last read writes `results.json`, and a benchmark that exited 0
but measured nothing fails the job with `EXIT_NO_RESULTS`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from srtd import results as measured
from srtd._value import value_class
from srtd.events import UnitState
from srtd.results import resolve
from srtd.supervisor._clock import Clock
from srtd.supervisor._console import Console
from srtd.supervisor._journal import Journal
from srtd.unit import Plan, Unit

if TYPE_CHECKING:
    from srtd.results import Point, Results

POLL_SECONDS = 1.0
_RUNNING = (UnitState.STARTING, UnitState.READY)


@value_class
class GateFailure:
    unit: str
    reason: str
    detail: dict[str, Any]


def _signature(path: Path) -> tuple[Any, ...] | None:
    """What changes when the tool writes: the file's, or the directory's JSON files' (mtime, size)."""
    try:
        if path.is_dir():
            return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in path.glob("*.json")))
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


class ResultsWatch:
    """Every benchmark unit's points, each journaled once: live while it runs, then at its end."""

    def __init__(
        self, plan: Plan, log_dir: Path, journal: Journal, console: Console, clock: Clock, poll: float = POLL_SECONDS
    ) -> None:
        self.plan = plan
        self.log_dir = log_dir
        self.journal = journal
        self.console = console
        self.clock = clock
        self.poll = poll
        self.units = [u for u in plan.units if u.results is not None]
        self._seen: dict[str, int] = {u.name: 0 for u in self.units}
        self._signatures: dict[str, tuple[Any, ...] | None] = {}
        self._final: set[str] = set()
        # unit -> the lost nodes it was restarted across, and where its interrupted results were set aside
        self.replaced: dict[str, tuple[list[str], list[str]]] = {}
        self._lock = anyio.Lock()

    def _read(self, unit: Unit, exit_code: int | None) -> Results:
        assert unit.results is not None
        return measured.collect(
            unit.results,
            self.log_dir,
            job=self.plan.name,
            job_id=self.plan.job_id,
            variant=self.plan.variant,
            unit=unit.name,
            exit_code=exit_code,
        )

    def _journal_new(self, unit: Unit, points: Sequence[Point]) -> None:
        view = self.journal.view.units[unit.name]
        for index in range(self._seen[unit.name], len(points)):
            detail = {"result": points[index].model_dump(mode="json", exclude_none=True), "point": index}
            self.journal.emit(unit.name, view.state, attempt=view.attempt, detail=detail)
        self._seen[unit.name] = max(self._seen[unit.name], len(points))

    async def follow(self, changed: Callable[[], Awaitable[None]]) -> None:
        """Until cancelled: journal the points of running benchmarks as their files change.

        `changed` returns at the job's next state change: no benchmark running, no clock.
        """
        if not self.units:
            return
        while True:
            running = [u for u in self.units if self._running(u)]
            if not running:
                await changed()
                continue
            await self.clock.sleep(self.poll)
            for unit in running:
                if self._running(unit):
                    await self._look(unit)

    def _running(self, unit: Unit) -> bool:
        return unit.name not in self._final and self.journal.view.units[unit.name].state in _RUNNING

    async def _look(self, unit: Unit) -> None:
        assert unit.results is not None
        path = resolve(unit.results, self.log_dir)
        signature = await anyio.to_thread.run_sync(_signature, path)
        if signature is None or signature == self._signatures.get(unit.name):
            return
        self._signatures[unit.name] = signature
        results = await anyio.to_thread.run_sync(self._read, unit, None)
        async with self._lock:
            if unit.name not in self._final and not results.verdict.reason:
                self._journal_new(unit, results.points)

    def restarted(self, unit: str, node: str, interrupted: str | None) -> None:
        """`unit` runs again after `node` was replaced; what it measured before is at `interrupted`
        (None: nothing yet).  Its points are journaled again from the first."""
        nodes, kept = self.replaced.setdefault(unit, ([], []))
        if node not in nodes:
            nodes.append(node)
        if interrupted is not None:
            kept.append(interrupted)
        self._seen[unit] = 0
        self._signatures.pop(unit, None)

    async def finish(self, units: Sequence[Unit]) -> GateFailure | None:
        """Read every ended benchmark once more, write results.json; the first gate failure of one
        that exited 0, or None."""
        failure: GateFailure | None = None
        for unit in units:
            if unit.results is None or unit.name in self._final:
                continue
            exit_code = self.journal.view.units[unit.name].exit_code
            results = await anyio.to_thread.run_sync(self._read, unit, exit_code)
            if unit.name in self.replaced:
                nodes, kept = self.replaced[unit.name]
                note = measured.AfterReplacement(nodes=tuple(nodes), interrupted=tuple(kept))
                results = results.model_copy(update={"replacement": note})
            async with self._lock:
                self._final.add(unit.name)
                self._journal_new(unit, results.points)
            with contextlib.suppress(OSError):  # the journal still carries every point
                await anyio.to_thread.run_sync(measured.write_results, results, self.log_dir)
            if results.points:
                title = f"{unit.name} results" + (f" ({results.replacement.describe()})" if results.replacement else "")
                self.console.results(measured.render(measured.rows_of([results]), title=title), results.to_json())
            verdict = results.verdict
            if failure is None and not verdict.ok and exit_code == 0 and verdict.reason:
                detail: dict[str, Any] = {"culprit": unit.name, "results": str(self.log_dir / "results.json")}
                if verdict.point is not None:
                    detail["point"] = results.points[verdict.point].model_dump(mode="json", exclude_none=True)
                failure = GateFailure(unit.name, verdict.reason, detail)
        return failure


__all__ = ["POLL_SECONDS", "GateFailure", "ResultsWatch"]
