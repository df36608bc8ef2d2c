"""Liveness logic on scripted attempts (FakeLauncher) in virtual time (ScaledClock).

The liveness probe goes through an `httpx.MockTransport` that records, on the
supervisor's own clock, when each probe was made; the console records the same clock
at every event, so "before ready" and "after stopping" are compared in one time base.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from srtd.events import Event, JobState, UnitState
from srtd.launch import FakeLauncher, FakeRun
from srtd.supervisor import JobResult, NullConsole, ScaledClock, Stop, supervise
from srtd.unit import HttpProbe, Liveness, LogProbe, Readiness, Restart, RestartMode, Unit, UnitKind
from tests.supervisor.helpers import PlanMaker, check_journal

pytestmark = pytest.mark.anyio

SPEED = 20.0


class ClockedConsole(NullConsole):
    """Keeps (clock time, event) for every event."""

    def __init__(self, clock: ScaledClock) -> None:
        self.clock = clock
        self.seen: list[tuple[float, Event]] = []

    def event(self, event: Event) -> None:
        self.seen.append((self.clock.now(), event))

    def at(self, unit: str | None, state: str, nth: int = 0) -> float:
        return [t for t, e in self.seen if e.unit == unit and e.state == state][nth]


class Health:
    """A scripted /health: `answer(t)` gives the status at clock time t, or None to hang."""

    def __init__(self, clock: ScaledClock, answer: Callable[[float], int | None]) -> None:
        self.clock = clock
        self.answer = answer
        self.calls: list[float] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        now = self.clock.now()
        self.calls.append(now)
        status = self.answer(now)
        if status is None:
            await anyio.sleep_forever()
        return httpx.Response(status)


def worker(name: str = "w", **fields: Any) -> Unit:
    return Unit(
        name=name,
        kind=UnitKind.WORKER,
        phase="p",
        nodes=("n1",),
        argv=("fake", name),
        log=f"{name}.log",
        **fields,
    )


def live(**fields: Any) -> Liveness:
    values: dict[str, Any] = {
        "probe": HttpProbe(node="n1", port=8000),
        "period_seconds": 1.0,
        "timeout_seconds": 0.5,
        "failure_threshold": 3,
        **fields,
    }
    return Liveness(**values)


async def go(
    tmp_path: Path,
    units: list[Unit],
    script: dict[str, FakeRun | list[FakeRun]],
    answer: Callable[[float], int | None],
    *,
    hold: bool = False,
    stop_at: float | None = None,
    console_type: type[ClockedConsole] = ClockedConsole,
) -> tuple[JobResult, ClockedConsole, Health, FakeLauncher]:
    plan = PlanMaker(root=tmp_path, token="liveness-logic").plan(*units, hold=hold)  # no processes: any token
    clock = ScaledClock(SPEED)
    launcher = FakeLauncher(script, clock=clock)  # type: ignore[arg-type]
    console = console_type(clock)
    health = Health(clock, answer)
    stop = Stop()
    results: list[JobResult] = []

    async def job() -> None:
        results.append(
            await supervise(
                plan,
                launcher,
                clock=clock,
                console=console,
                stop=stop,
                http_transport=httpx.MockTransport(health),
            )
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(job)
            if stop_at is not None:
                await clock.sleep(stop_at)
                stop.request(signal.SIGTERM)
    result = results[0]
    check_journal(result.journal, [u.name for u in units])
    assert launcher.live() == []
    return result, console, health, launcher


async def test_no_liveness_probe_before_the_unit_is_ready(tmp_path: Path) -> None:
    units = [
        worker(readiness=Readiness(probe=LogProbe(pattern="ready")), liveness=live()),
        Unit(name="bench", kind=UnitKind.BENCHMARK, phase="p", nodes=("n1",), argv=("b",), log="b.log", terminal=True),
    ]
    script: dict[str, FakeRun | list[FakeRun]] = {
        "w": FakeRun(lines=((8.0, "ready"),)),
        "bench": FakeRun(exit_after=14.0),
    }
    result, console, health, _ = await go(tmp_path, units, script, lambda t: 200)
    assert result.state is JobState.SUCCEEDED
    ready = console.at("w", "ready")
    assert ready >= 7.5
    assert health.calls, "the ready unit was never probed"
    assert min(health.calls) >= ready + 0.5  # the first check is one period after ready
    assert 3 <= len(health.calls) <= 7  # about one per period from ready (≈8 s) to the end (14 s)


async def test_no_liveness_probe_once_the_job_is_stopping(tmp_path: Path) -> None:
    # Healthy until t=4, then every probe hangs; the stop at t=6 comes well before the
    # sixth failed period (t≥9.5): the unit is stopped, never condemned, never probed again.
    units = [worker(liveness=live(failure_threshold=6), terminate_timeout=5.0)]
    script: dict[str, FakeRun | list[FakeRun]] = {"w": FakeRun(term_delay=3.0)}
    result, console, health, launcher = await go(
        tmp_path, units, script, lambda t: 200 if t < 4 else None, hold=True, stop_at=6.0
    )
    assert result.state is JobState.CANCELLED
    stopping = console.at(None, "stopping")
    assert health.calls
    assert max(health.calls) < stopping
    assert [e.state for _, e in console.seen if e.unit == "w"] == ["starting", "ready", "stopping", "stopped"]
    assert result.view.units["w"].reason == "stopped"
    assert not any("unhealthy" in (e.reason or "") for e in result.events)
    assert [(s.unit, s.signal) for s in launcher.signals] == [("w", signal.SIGTERM)]


async def test_a_passing_period_resets_the_count(tmp_path: Path) -> None:
    # Every other check fails: never two in a row, so never unhealthy.
    units = [worker(liveness=live(failure_threshold=2))]
    calls = iter(range(1000))
    result, _, health, _ = await go(
        tmp_path, units, {"w": FakeRun()}, lambda t: 500 if next(calls) % 2 else 200, hold=True, stop_at=12.0
    )
    assert len(health.calls) >= 8
    assert result.view.units["w"].state is UnitState.STOPPED
    assert result.view.units["w"].restarts == 0


async def test_unhealthy_restarts_on_failure_and_is_journaled(tmp_path: Path) -> None:
    # The first attempt answers 503 from t=3 on; the second attempt is healthy.
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff_seconds=1.0)
    units = [worker(liveness=live(), restart=policy)]
    restarted: list[float] = []

    def answer(t: float) -> int:
        return 503 if t >= 3 and not restarted else 200

    class Marking(ClockedConsole):
        def event(self, event: Event) -> None:
            super().event(event)
            if event.unit == "w" and event.state == "backoff":
                restarted.append(self.clock.now())

    result, console, _, launcher = await go(
        tmp_path, units, {"w": FakeRun()}, answer, hold=True, stop_at=14.0, console_type=Marking
    )
    events = [e for _, e in console.seen if e.unit == "w"]
    assert [e.state for e in events][:7] == ["starting", "ready", "stopping", "exited", "backoff", "starting", "ready"]
    stopping = events[2]
    assert stopping.reason == "unhealthy: http http://n1:8000/health failed 3 times (last: HTTP 503 (want 200))"
    assert stopping.detail == {
        "unhealthy": {"probe": "http http://n1:8000/health", "failures": 3, "last": "HTTP 503 (want 200)"}
    }
    decided = console.at("w", "stopping")
    assert 5.0 <= decided <= 9.0  # failed periods at ≈3, 4, 5 after ready
    assert result.view.units["w"].restarts == 1
    assert launcher.signals[0].signal == signal.SIGTERM


async def test_unhealthy_critical_without_restarts_fails_the_job(tmp_path: Path) -> None:
    units = [worker(liveness=live())]
    result, *_ = await go(tmp_path, units, {"w": FakeRun()}, lambda t: 200 if t < 2 else 500, hold=True)
    assert result.state is JobState.FAILED
    assert result.exit_code == 1
    assert result.culprit == "w"
    assert result.reason == "w failed: unhealthy: http http://n1:8000/health failed 3 times (last: HTTP 500 (want 200))"
    assert result.view.units["w"].state is UnitState.FAILED


async def test_unhealthy_non_critical_is_stopped_and_the_job_goes_on(tmp_path: Path) -> None:
    units = [
        worker(liveness=live(), critical=False),
        Unit(name="bench", kind=UnitKind.BENCHMARK, phase="p", nodes=("n1",), argv=("b",), log="b.log", terminal=True),
    ]
    script: dict[str, FakeRun | list[FakeRun]] = {"w": FakeRun(), "bench": FakeRun(exit_after=10.0)}
    result, console, *_ = await go(tmp_path, units, script, lambda t: 200 if t < 2 else 500)
    assert result.state is JobState.SUCCEEDED
    assert [e.state for _, e in console.seen if e.unit == "w"] == ["starting", "ready", "stopping", "exited", "failed"]
    assert (result.view.units["w"].reason or "").startswith("unhealthy: http http://n1:8000/health failed 3 times")


async def test_log_silence_counts_one_failure_per_period(tmp_path: Path) -> None:
    # Lines every second until t=4; silence of 3 s fails the periods from t≈7 on:
    # the third failed period (t≈9) condemns it.  The probe-less liveness makes no HTTP call.
    silence = Liveness(period_seconds=1.0, failure_threshold=3, log_silence_seconds=3.0)
    lines = tuple((float(t), f"tick {t}") for t in range(1, 5))
    units = [worker(liveness=silence)]
    result, console, health, _ = await go(tmp_path, units, {"w": FakeRun(lines=lines)}, lambda t: 200, hold=True)
    assert health.calls == []
    assert result.state is JobState.FAILED
    decided = console.at("w", "stopping")
    assert 8.0 <= decided <= 13.0
    assert (result.reason or "").startswith("w failed: unhealthy: log silence (3 s) failed 3 times (last: no new log")


async def test_an_unhealthy_leader_restarts_its_whole_group(tmp_path: Path) -> None:
    # A two-node worker: only the leader has the port (and the probe); its follower goes with it.
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff_seconds=1.0)
    restarted: list[float] = []

    class Marking(ClockedConsole):
        def event(self, event: Event) -> None:
            super().event(event)
            if event.unit == "lead" and event.state == "backoff":
                restarted.append(self.clock.now())

    units = [
        worker("lead", liveness=live(), restart=policy, group="decode_0"),
        worker("follow", restart=policy, group="decode_0"),
    ]
    result, console, _, _ = await go(
        tmp_path,
        units,
        {"lead": FakeRun(), "follow": FakeRun()},
        lambda t: 503 if t >= 2 and not restarted else 200,
        hold=True,
        stop_at=12.0,
        console_type=Marking,
    )
    lead = [e for _, e in console.seen if e.unit == "lead"]
    follow = [e for _, e in console.seen if e.unit == "follow"]
    assert (lead[2].state, (lead[2].reason or "")[:10]) == ("stopping", "unhealthy:")
    assert follow[2].state == "stopping"
    assert (follow[2].reason or "").startswith("restarted with group decode_0: lead unhealthy: ")
    assert result.view.units["lead"].restarts == 1
    assert result.view.units["follow"].restarts == 1
    assert [e.state for e in follow][-4:] == ["starting", "ready", "stopping", "stopped"]
