"""The supervisor's control verbs and its service hook, in process, with real processes."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from srtd.errors import ControlError
from srtd.events import JobView, UnitState
from srtd.launch import LocalLauncher
from srtd.supervisor import Job, NullConsole, supervise
from srtd.unit import LogProbe, Readiness, Restart, RestartMode
from tests.supervisor.helpers import PlanMaker, states

pytestmark = pytest.mark.anyio


async def until(job: Job, check: Callable[[JobView], bool]) -> None:
    while not check(job.journal.view):
        await anyio.sleep(0.02)


async def test_a_requested_restart_ignores_the_policy_and_is_counted(maker: PlanMaker) -> None:
    ready = Readiness(probe=LogProbe(pattern=r"^up"))
    maker.unit("w", "--say", "0.1:up {attempt}", readiness=ready)  # policy: never
    maker.unit("x", restart=Restart(policy=RestartMode.ON_FAILURE, max_restarts=0), critical=False)
    problems: list[str] = []

    @asynccontextmanager
    async def driver(job: Job) -> AsyncIterator[None]:
        async def drive() -> None:
            await until(job, lambda v: v.state.value == "running")
            job.request_restart("w")
            await until(job, lambda v: v.units["w"].state is UnitState.READY and v.units["w"].attempt == 1)
            job.request_restart("x")  # max_restarts 0 does not refuse a restart on request
            await until(job, lambda v: v.units["x"].attempt == 1 and v.units["x"].state is UnitState.READY)
            try:
                job.request_restart("nope")
            except ControlError as e:
                problems.append(str(e))
            await job.signal_unit("x", signal.SIGTERM)  # x dies of it; on-failure, 1 of 0: x fails
            await until(job, lambda v: v.units["x"].state is UnitState.FAILED)
            try:
                await job.signal_unit("x", signal.SIGTERM)
            except ControlError as e:
                problems.append(str(e))
            job.request_stop("the test is over")

        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            yield

    with anyio.fail_after(60):
        result = await supervise(maker.plan(hold=True), LocalLauncher(), console=NullConsole(), services=[driver])
    assert (result.state.value, result.exit_code, result.reason) == ("cancelled", 143, "the test is over")
    assert problems == ["no unit 'nope' in job local-1", "x has no running process (it is failed)"]
    w = [(e.state, e.attempt, e.reason) for e in result.events if e.unit == "w"]
    assert w[:7] == [
        ("starting", 0, None),
        ("ready", 0, None),
        ("stopping", 0, "restart requested"),
        ("exited", 0, "stopped: restart requested"),
        ("backoff", 1, "restart 1 of 3 in 0 s: restart requested"),
        ("starting", 1, None),
        ("ready", 1, None),
    ]
    assert states(result.events, "x")[:6] == ["starting", "ready", "stopping", "exited", "backoff", "starting"]
    assert result.view.units["w"].restarts == 1
    assert result.view.units["x"].restarts == 1
    assert result.view.units["x"].reason is not None
    assert "restarts exhausted: 1 of 0" in result.view.units["x"].reason
    # the signal that ended it came from a person, and the journal says so
    assert result.view.units["x"].reason.startswith("was killed by SIGTERM (sent through srtd signal)")
    assert (maker.log_dir / "w.log.1").read_text() == "up 0\n"
