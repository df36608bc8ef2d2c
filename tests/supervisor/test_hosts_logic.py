"""Host steps in the supervisor (FakeLauncher, virtual time): the setup steps are the job's
first tier, the teardown steps its last, each bounded by its run timeout."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from srtd.errors import PlanError
from srtd.events import JobState
from srtd.launch import FakeRun
from srtd.supervisor import Stop
from srtd.unit import Condition, Edge, Unit, UnitKind
from tests.supervisor.helpers import journal_so_far
from tests.supervisor.test_logic import Run, bench, fu, go, log_ready

pytestmark = pytest.mark.anyio

NODES = ("n1", "n2")


def setup_steps(*, critical: bool = True, timeout: float = 100.0) -> list[Unit]:
    return [
        fu(
            f"host_setup_{n}",
            kind=UnitKind.HOST,
            critical=critical,
            run_timeout=timeout,
            terminate_timeout=5,
        )
        for n in NODES
    ]


def teardown_steps(*, timeout: float = 100.0, tier: int = 1) -> list[Unit]:
    return [
        fu(
            f"host_teardown_{n}",
            kind=UnitKind.HOST,
            critical=False,
            run_timeout=timeout,
            terminate_timeout=5,
            on_teardown=True,
            tier=tier,
        )
        for n in NODES
    ]


def job(setup: list[Unit], teardown: list[Unit], **worker: Any) -> list[Unit]:
    """A worker and a benchmark after the setup steps, as the plan builds them."""
    ended = [Edge(unit=s.name, condition=Condition.ENDED) for s in setup]
    w0 = fu("w0", after=ended, readiness=log_ready(), **worker)
    b, _ = bench([Edge(unit="w0")])
    return [*setup, w0, b, *teardown]


READY = FakeRun(lines=((1.0, "ready"),))


def last_of(run: Run, *units: str) -> int:
    return max(i for i, e in enumerate(run.events) if e.unit in units)


def first_of(run: Run, *units: str) -> int:
    return min(i for i, e in enumerate(run.events) if e.unit in units)


async def test_setup_before_everything_and_teardown_after_everything(tmp_path: Path) -> None:
    script = {
        "host_setup_n1": FakeRun(exit_after=3.0),
        "host_setup_n2": FakeRun(exit_after=5.0),
        "w0": READY,
        "bench": FakeRun(exit_after=1.0),
        "host_teardown_n1": FakeRun(exit_after=2.0),
        "host_teardown_n2": FakeRun(exit_after=1.0),
    }
    run = await go(tmp_path, job(setup_steps(), teardown_steps()), script)
    assert run.result.state is JobState.SUCCEEDED
    assert run.result.exit_code == 0
    # nothing of the job starts before both setup steps have ended
    assert run.index("w0", "starting") > last_of(run, "host_setup_n1", "host_setup_n2")
    assert run.started("w0")[0] >= 5.0
    assert run.states("host_setup_n2") == ["starting", "ready", "exited", "stopped"]
    # the teardown steps start once every other unit has stopped, in the job's stopping state
    assert first_of(run, "host_teardown_n1", "host_teardown_n2") > last_of(run, "w0", "bench")
    assert run.index("host_teardown_n1", "starting") > run.index(None, "stopping")
    assert run.states("host_teardown_n1") == ["starting", "ready", "exited", "stopped"]
    assert run.states(None) == ["starting", "running", "stopping", "succeeded"]
    assert run.events[-2].unit in ("host_teardown_n1", "host_teardown_n2")


async def test_a_failed_setup_step_fails_the_job_and_the_teardown_still_runs(tmp_path: Path) -> None:
    script = {"host_setup_n1": FakeRun(exit_after=1.0), "host_setup_n2": FakeRun(exit_after=2.0, code=3)}
    run = await go(tmp_path, job(setup_steps(), teardown_steps()), script, default=FakeRun(exit_after=1.0))
    assert run.result.state is JobState.FAILED
    assert run.result.exit_code == 1
    assert run.result.culprit == "host_setup_n2"
    assert run.result.reason == "host_setup_n2 failed: exited with exit code 3"
    # the worker waited and never launched; the teardown steps ran
    assert run.started("w0") == []
    assert run.states("w0") == ["waiting", "stopped"]
    assert run.states("bench") == ["waiting", "stopped"]
    assert [s.unit for s in run.launcher.starts][-2:] == ["host_teardown_n1", "host_teardown_n2"]
    assert run.states("host_teardown_n2") == ["starting", "ready", "exited", "stopped"]


async def test_an_ignored_setup_failure_is_a_warning_and_the_job_goes_on(tmp_path: Path) -> None:
    script = {
        "host_setup_n1": FakeRun(exit_after=1.0, code=3),
        "host_setup_n2": FakeRun(exit_after=2.0),
        "w0": READY,
        "bench": FakeRun(exit_after=1.0),
    }
    units = job(setup_steps(critical=False), teardown_steps())
    run = await go(tmp_path, units, script, default=FakeRun(exit_after=1.0))
    assert run.result.state is JobState.SUCCEEDED
    assert run.result.exit_code == 0
    failed = run.events[run.index("host_setup_n1", "failed")]
    assert failed.reason == "exited with exit code 3"
    assert failed.detail == {"ignored": True}
    assert run.index("w0", "starting") > run.index("host_setup_n2", "stopped")


async def test_a_hung_setup_step_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    script = {"host_setup_n1": FakeRun(exit_after=1.0), "host_setup_n2": FakeRun()}  # n2 never ends
    run = await go(tmp_path, job(setup_steps(timeout=10.0), teardown_steps()), script, default=FakeRun(exit_after=1.0))
    assert run.result.exit_code == 1
    assert run.result.reason == "host_setup_n2 failed: did not finish within 10 s"
    assert run.signals("host_setup_n2") == [("host_setup_n2", signal.SIGTERM)]
    assert 10.0 <= run.signal_times("host_setup_n2", signal.SIGTERM)[0] < 12.0
    assert run.started("w0") == []


async def test_a_hung_teardown_step_is_stopped_and_does_not_change_the_exit_code(tmp_path: Path) -> None:
    script = {
        "host_setup_n1": FakeRun(exit_after=1.0),
        "host_setup_n2": FakeRun(exit_after=1.0),
        "w0": READY,
        "bench": FakeRun(exit_after=1.0),
        "host_teardown_n1": FakeRun(),  # hangs
        "host_teardown_n2": FakeRun(exit_after=1.0),
    }
    run = await go(tmp_path, job(setup_steps(), teardown_steps(timeout=8.0)), script)
    assert run.result.state is JobState.SUCCEEDED
    assert run.result.exit_code == 0
    hung = run.events[run.index("host_teardown_n1", "failed")]
    assert hung.reason == "did not finish within 8 s"
    assert hung.detail == {"ignored": True}
    assert run.signals("host_teardown_n1") == [("host_teardown_n1", signal.SIGTERM)]


async def test_a_cancelled_job_runs_its_teardown_steps_after_its_units(tmp_path: Path) -> None:
    stop: Stop | None = None

    async def main() -> Run:
        nonlocal stop
        stop = Stop()
        script = {
            "host_setup_n1": FakeRun(exit_after=1.0),
            "host_setup_n2": FakeRun(exit_after=1.0),
            "w0": FakeRun(lines=((1.0, "ready"),), term_delay=3.0, term_code=0),
            "bench": FakeRun(),  # runs until stopped
            "host_teardown_n1": FakeRun(exit_after=1.0),
            "host_teardown_n2": FakeRun(exit_after=1.0),
        }
        async with anyio.create_task_group() as tg:

            async def cancel_later() -> None:
                await anyio.sleep(0.5)  # real time: 10 virtual seconds, the job runs by then
                assert stop is not None
                stop.request(signal.SIGINT)

            tg.start_soon(cancel_later)
            return await go(tmp_path, job(setup_steps(), teardown_steps()), script, stop=stop)

    run = await main()
    assert run.result.state is JobState.CANCELLED
    assert run.result.exit_code == 130
    assert first_of(run, "host_teardown_n1", "host_teardown_n2") > last_of(run, "w0", "bench")
    assert run.states("host_teardown_n1") == ["starting", "ready", "exited", "stopped"]
    assert run.states("host_teardown_n2") == ["starting", "ready", "exited", "stopped"]


async def test_a_second_ctrl_c_kills_the_teardown_steps(tmp_path: Path) -> None:
    script = {
        "host_setup_n1": FakeRun(exit_after=1.0),
        "host_setup_n2": FakeRun(exit_after=1.0),
        "w0": READY,
        "bench": FakeRun(exit_after=1.0),
        "host_teardown_n1": FakeRun(),  # both hang
        "host_teardown_n2": FakeRun(),
    }

    async def main() -> Run:
        stop = Stop()

        async def kill_once_they_run() -> None:
            # the journal is written behind the events: once it shows both started, they run
            while (
                len(
                    [
                        e
                        for e in journal_so_far(tmp_path / "logs")
                        if e.state == "starting" and e.unit and "teardown" in e.unit
                    ]
                )
                < 2
            ):
                await anyio.sleep(0.02)
            stop.kill(signal.SIGINT)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_once_they_run)
            return await go(tmp_path, job(setup_steps(), teardown_steps(timeout=1000.0)), script, stop=stop)

    run = await main()
    for name in ("host_teardown_n1", "host_teardown_n2"):
        assert run.signals(name) == [(name, signal.SIGKILL)]
        assert run.states(name)[-1] == "failed"
    assert run.result.state is JobState.SUCCEEDED  # the job had ended before; the kill only cut its teardown short


async def test_a_plan_that_waits_for_a_teardown_step_is_refused_before_anything_starts(tmp_path: Path) -> None:
    teardown = teardown_steps()
    waits = fu("w0", after=[Edge(unit="host_teardown_n1", condition=Condition.ENDED)])
    hooked = replace(teardown[1], after=(Edge(unit="w0"),))
    with pytest.raises(PlanError) as info:
        await go(tmp_path, [waits, teardown[0], hooked])
    assert list(info.value.messages) == [
        "unit 'w0' depends on 'host_teardown_n1', which runs only at teardown",
        "unit 'host_teardown_n2' runs at teardown and cannot wait for other units",
    ]
    assert not (tmp_path / "logs").exists()
