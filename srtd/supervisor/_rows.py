"""What the console shows of a running job: its progress rows, its summary, the culprit.

Read-only views of the job's runners and journal; the `Job` decides, these describe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from srtd.events import JobState, JobView, UnitState
from srtd.launch import ExitStatus
from srtd.supervisor._console import Console, ProgressRow, SummaryRow
from srtd.supervisor._probes import describe
from srtd.unit import LogProbe

if TYPE_CHECKING:
    from srtd.supervisor._journal import Journal
    from srtd.supervisor._unit import UnitRunner


def progress_rows(runners: Iterable[UnitRunner], now: float, address: Callable[[str], str]) -> list[ProgressRow]:
    """The units still on their way to ready, and what each waits for."""
    rows: list[ProgressRow] = []
    for r in runners:
        state = r.state
        if state is UnitState.READY or r.final or r.unit.on_teardown:  # host teardown steps: not before the end
            continue
        waiting = ""
        if state is UnitState.WAITING:
            # No edge left to wait for: its launch is on the way (an srun retried while slurmctld is silent).
            edges = ", ".join(f"{e.unit} ({e.condition.value})" for e in r.waiting_on)
            waiting = f"after {edges}" if edges else "its launch"
        elif state is UnitState.STARTING and r.unit.readiness is not None:
            probe = r.unit.readiness.probe
            host = None if isinstance(probe, LogProbe) else address(probe.node)
            waiting = "probe " + describe(probe, host)
            if r.last_probe:
                waiting += f": {r.last_probe}"
        elif state is UnitState.BACKOFF:
            waiting = "restart backoff"
        took = now - r.launched_at if r.launched_at is not None and state is UnitState.STARTING else None
        rows.append(ProgressRow(r.name, state.value, waiting, took))
    return rows


async def show_progress(
    journal: Journal, console: Console, interval: float, rows: Callable[[], list[ProgressRow]]
) -> None:
    """Every `interval` seconds while the job starts: the units not ready yet."""
    while journal.view.state is JobState.STARTING:
        await anyio.sleep(interval)
        if journal.view.state is not JobState.STARTING:
            return
        console.progress(rows())


async def keep_drawn(console: Console, changed: Callable[[], Awaitable[None]]) -> None:
    """After each change of the job: a change the console held back (it draws at most every so
    often) is drawn once due, though no event follows it; the rest of the time, asleep."""
    while True:
        while (due := console.redraw_due()) is not None:  # also what came before this task began
            await anyio.sleep(due)
            console.redraw()
        await changed()


def summary_rows(runners: Iterable[UnitRunner], view: JobView) -> list[SummaryRow]:
    """One row per unit: where it ran, how it ended, its restarts, how long it took to be ready."""
    rows = []
    for r in runners:
        unit = view.units[r.name]
        status = (
            ExitStatus(unit.exit_code, unit.signal).describe()
            if unit.exit_code is not None or unit.signal is not None
            else "-"
        )
        rows.append(
            SummaryRow(
                unit=r.name,
                node=r.unit.node if r.unit.nodes else "-",
                state=unit.state.value,
                restarts=r.restarts.count,
                exit=status,
                ready_after=r.ready_seconds,
            )
        )
    return rows


def root_cause(runners: Mapping[str, UnitRunner], culprit: str | None) -> str | None:
    """A unit that never started because a dependency failed points at that dependency."""
    runner = runners.get(culprit) if culprit else None
    return runner.root_cause or culprit if runner is not None else culprit


def culprit_text(
    runners: Mapping[str, UnitRunner],
    view: JobView,
    *,
    reason: str,
    culprit: str | None,
    first_fatal: tuple[str, str] | None,
) -> str:
    """What the console says at once when the job fails: the culprit and its log's tail."""
    culprit = root_cause(runners, culprit)
    fatal = first_fatal[1] if first_fatal and culprit == first_fatal[0] else None
    log: Path | None = runners[culprit].log_path if culprit is not None and culprit in runners else None
    from srtd.supervisor._postmortem import culprit_block  # a failure's words: loaded when one is said

    return culprit_block(reason=reason, culprit=culprit, view=view, fatal_line=fatal, log=log)


def journal_unwritable(why: str) -> str:
    # said once; the job goes on deciding, the events stay in memory until the file takes them
    return f"srtd: cannot write {why}; the journal is kept in memory until it can be written"


def journal_writable(name: str, caught_up: int) -> str:
    return f"srtd: {name} is written again ({caught_up} events caught up)"
