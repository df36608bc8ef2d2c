"""Stopping a unit's process: SIGTERM, up to `terminate_timeout`, then SIGKILL; for an
attempt that must restart or failed while the job goes on (`stop_own`), and for the
job's teardown (`terminate`, tier by tier)."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

import anyio

from srtd.events import UnitState
from srtd.launch import signal_name
from srtd.supervisor._attempt import KILL_REAP, ended
from srtd.supervisor._clock import within

if TYPE_CHECKING:
    from srtd.supervisor._unit import UnitRunner


async def _signal_and_wait(runner: UnitRunner) -> bool:
    """SIGTERM, wait up to `terminate_timeout`, then SIGKILL.  True if it had to kill."""
    handle = runner.handle
    assert handle is not None

    async def wait() -> None:
        runner.status = await handle.wait()

    runner.signalled = True
    await handle.signal(signal.SIGTERM)
    if await within(runner.port.clock, runner.unit.terminate_timeout, wait):
        return False
    await handle.kill()
    with anyio.move_on_after(KILL_REAP):
        await wait()
    return True


async def stop_own(runner: UnitRunner, reason: str, detail: dict[str, Any] | None = None) -> None:
    """Stop a live attempt that failed (or must restart) while the job goes on."""
    runner.emit(UnitState.STOPPING, attempt=runner.attempt, reason=reason, detail=detail)
    killed = await _signal_and_wait(runner)
    status = runner.status
    note = f"killed after {runner.unit.terminate_timeout:g} s" if killed else "stopped"
    runner.emit(
        UnitState.EXITED,
        attempt=runner.attempt,
        exit_code=status.code if status is not None else None,
        signal=status.signal if status is not None else None,
        reason=f"{note}: {reason}",
    )


async def terminate(runner: UnitRunner) -> None:
    """Teardown of this unit (its task is already cancelled): end it for good."""
    if runner.final:
        return
    if not runner.live:
        state = UnitState.FAILED if runner.failure else UnitState.STOPPED
        runner.end_as(state, runner.failure or "job stopping")
        return
    assert runner.handle is not None
    already = runner.handle.poll()
    if already is not None and not runner.signalled and runner.port.stop_requested:
        runner.status = already
        ended_first(runner)
        return
    if runner.state is not UnitState.STOPPING:
        runner.emit(UnitState.STOPPING, attempt=runner.attempt, reason="job stopping")
    killed = await _signal_and_wait(runner)
    runner.killed_after_timeout = killed
    if runner.status is None:
        note = "did not exit after SIGKILL"
    elif killed:
        note = f"killed after {runner.unit.terminate_timeout:g} s ({signal_name(signal.SIGTERM)} not obeyed)"
    elif runner.status.lost is not None:
        note = f"left to Slurm: {runner.status.lost}"  # its node went while it was being stopped
    else:
        note = "stopped"
    if runner.failure:
        runner.end_as(UnitState.FAILED, runner.failure)
    else:
        runner.end_as(UnitState.STOPPED, note)


def ended_first(runner: UnitRunner) -> None:
    """The job is stopping and this attempt ended before srtd signalled it (under Slurm:
    `scancel <job>` or the time limit signalled every step at once)."""
    status = runner.status
    assert status is not None
    runner.end_as(
        UnitState.STOPPED,
        f"ended before srtd stopped it ({ended(status)}): stopped from outside",
        {"ended_before_stop": True},
    )
