"""After the benchmark: its results read through the plan's `ResultsSpec`, journaled, gated.

The supervisor knows no benchmark: a unit's `results` (plan data) names the reader and
the path, and `srtd.results` does the reading.  Each point becomes a journal event of
the unit (its state repeated, the point in `detail.result`, docs/events.md), the
contract goes to `results.json`, and a benchmark that exited 0 but measured nothing
fails the job with `EXIT_NO_RESULTS`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from srtd.results import Results, collect, render, rows_of, write_results
from srtd.supervisor._console import Console
from srtd.supervisor._journal import Journal
from srtd.unit import Plan, Unit


@dataclass(frozen=True)
class GateFailure:
    unit: str
    reason: str
    detail: dict[str, Any]


def _read(plan: Plan, unit: Unit, log_dir: Path, exit_code: int | None) -> Results:
    assert unit.results is not None
    results = collect(
        unit.results,
        log_dir,
        job=plan.name,
        job_id=plan.job_id,
        variant=plan.variant,
        unit=unit.name,
        exit_code=exit_code,
    )
    with contextlib.suppress(OSError):  # the journal still carries every point
        write_results(results, log_dir)
    return results


async def gather_results(
    plan: Plan, units: Sequence[Unit], log_dir: Path, journal: Journal, console: Console
) -> GateFailure | None:
    """Read every ended benchmark's results; the first gate failure of one that exited 0, or None."""
    failure: GateFailure | None = None
    for unit in units:
        if unit.results is None:
            continue
        view = journal.view.units[unit.name]
        results = await anyio.to_thread.run_sync(_read, plan, unit, log_dir, view.exit_code)
        for index, point in enumerate(results.points):
            journal.emit(
                unit.name,
                view.state,
                attempt=view.attempt,
                detail={"result": point.model_dump(mode="json", exclude_none=True), "point": index},
            )
        if results.points:
            console.results(render(rows_of([results]), title=f"{unit.name} results"), results.to_json())
        verdict = results.verdict
        if failure is None and not verdict.ok and view.exit_code == 0 and verdict.reason:
            detail: dict[str, Any] = {"culprit": unit.name, "results": str(log_dir / "results.json")}
            if verdict.point is not None:
                detail["point"] = results.points[verdict.point].model_dump(mode="json", exclude_none=True)
            failure = GateFailure(unit.name, verdict.reason, detail)
    return failure
