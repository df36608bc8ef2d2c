"""The after-job hook (the result publishers' seam): when it runs, what it journals, how it ends the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from srtd.launch import FakeLauncher, FakeRun
from srtd.supervisor import AfterJob, AfterJobFailure, NullConsole, ScaledClock, supervise
from srtd.unit import Plan, Unit, UnitKind

pytestmark = pytest.mark.anyio


def _plan(tmp_path: Path) -> Plan:
    bench = Unit(
        name="bench", kind=UnitKind.BENCHMARK, phase="p", nodes=("n1",), argv=("fake",), log="b.log", terminal=True
    )
    return Plan(
        name="after",
        job_id="1",
        log_dir=str(tmp_path / "logs"),
        nodes={},
        allocation=("n1",),
        phases=("p",),
        units=(bench,),
    )


async def _go(tmp_path: Path, exit_code: int, *hooks: Any) -> Any:
    clock = ScaledClock(20.0)
    launcher = FakeLauncher({"bench": FakeRun(exit_after=1.0, code=exit_code)}, clock=clock)
    with anyio.fail_after(30):
        return await supervise(_plan(tmp_path), launcher, clock=clock, console=NullConsole(), after_job=hooks)


async def test_hooks_run_in_order_after_the_teardown_and_the_first_failure_decides(tmp_path: Path) -> None:
    seen: list[str] = []

    def hook(name: str, fail: int | None) -> Any:
        async def run(job: AfterJob) -> AfterJobFailure | None:
            seen.append(name)
            job.note(f"{name} ran", {"hook": name})
            return AfterJobFailure(fail, f"{name} failed", {"hook": name}) if fail else None

        return run

    result = await _go(tmp_path, 0, hook("a", None), hook("b", 6), hook("c", 9))
    assert seen == ["a", "b", "c"]
    assert (result.exit_code, result.state.value, result.reason) == (6, "failed", "b failed")
    job = [(e.state, e.reason) for e in result.events if e.unit is None]
    assert job[-5:] == [
        ("stopping", "every terminal unit exited 0"),
        ("stopping", "a ran"),
        ("stopping", "b ran"),
        ("stopping", "c ran"),
        ("failed", "b failed"),
    ]
    assert result.events[-1].detail == {"hook": "b"}
    bench_stopped = max(i for i, e in enumerate(result.events) if e.unit == "bench")
    first_note = next(i for i, e in enumerate(result.events) if e.reason == "a ran")
    assert bench_stopped < first_note  # after every unit is down
    assert result.postmortem is not None


async def test_a_job_that_failed_runs_no_hook(tmp_path: Path) -> None:
    seen: list[str] = []

    async def hook(job: AfterJob) -> None:
        seen.append("ran")

    result = await _go(tmp_path, 3, hook)
    assert (result.exit_code, seen) == (3, [])
