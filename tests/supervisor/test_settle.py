"""A launch that takes time to take (srun waiting for Slurm to create its step) never
holds up a teardown, a refusal found then fails the unit, and a group restart that
meets it restarts it too.  FakeLauncher's `settle_after` / `settle_error` script that wait."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import pytest

from srtd.events import JobState
from srtd.launch import FakeRun
from srtd.supervisor import Stop
from tests.supervisor.test_logic import SPEED, Run, bench, fu, go, on_failure

pytestmark = pytest.mark.anyio

NEVER = 700.0  # virtual seconds: 35 s at SPEED, beyond go()'s 30 s real-time bound


async def test_a_stop_does_not_wait_for_a_launch_still_settling(tmp_path: Path) -> None:
    stop = Stop()
    done: list[Run] = []

    async def job() -> None:
        done.append(
            await go(tmp_path, [fu("quick"), fu("slow")], {"slow": FakeRun(settle_after=NEVER)}, hold=True, stop=stop)
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(job)
        await anyio.sleep(0.3)
        stop.request(signal.SIGUSR1)
    run = done[0]
    assert NEVER / SPEED > 30  # had the stop waited for the launch, go() would have timed out
    assert run.result.state is JobState.CANCELLED
    # the journal shows the attempt the teardown stopped: starting, then its stop
    assert run.states("slow") == ["starting", "stopping", "stopped"]
    assert run.states("quick") == ["starting", "ready", "stopping", "stopped"]
    assert sorted(run.signals()) == [("quick", 15), ("slow", 15)]
    assert run.launcher.live() == []


async def test_a_launch_refused_while_settling_fails_the_unit_with_the_launchers_words(tmp_path: Path) -> None:
    refused = FakeRun(settle_after=2.0, settle_error="srun refused step a (exit code 1): srun: error: no node")
    run = await go(tmp_path, [fu("a"), fu("b", after=[])], {"a": refused}, hold=True)
    assert run.result.state is JobState.FAILED
    assert run.result.exit_code == 1
    assert (
        run.result.view.units["a"].reason == "launch failed: a: srun refused step a (exit code 1): srun: error: no node"
    )
    assert run.states("a") == ["failed"]  # never `starting`: nothing ran
    assert run.signals("a") == []  # the refused attempt had ended: nothing to stop
    assert run.signals("b") == [("b", 15)]


async def test_a_group_restart_meeting_a_settling_sibling_restarts_it_once_it_has_settled(tmp_path: Path) -> None:
    policy = on_failure(backoff=0.5)
    b, b_run = bench([], exit_after=20.0)
    units = [fu("p0_a", group="p0", restart=policy), fu("p0_b", group="p0", restart=policy), b]
    script = {
        "p0_a": [FakeRun(exit_after=1.0, code=1), FakeRun()],
        "p0_b": [FakeRun(settle_after=3.0), FakeRun()],  # still settling when p0_a fails at 1 s
        "bench": b_run,
    }
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 0
    assert [(s.unit, s.attempt) for s in run.launcher.starts if s.unit == "p0_b"] == [("p0_b", 0), ("p0_b", 1)]
    b0 = run.started("p0_b")[0]
    term = run.signal_times("p0_b", signal.SIGTERM)[0]
    assert term - b0 >= 3.0  # stopped once its launch had settled, not before
    assert run.states("p0_b")[:4] == ["starting", "stopping", "exited", "backoff"]
    reason = next(e.reason for e in run.events if e.unit == "p0_b" and e.state == "backoff")
    assert reason is not None
    assert "restarted with group p0: p0_a exited with exit code 1" in reason
    a1, b1 = run.started("p0_a")[1], run.started("p0_b")[1]
    assert a1 > term
    assert b1 > term
