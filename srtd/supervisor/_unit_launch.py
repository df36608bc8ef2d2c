"""Launching one attempt of a unit: the start (shielded, so a process is never left
without its recorded handle), the settle (not shielded: srun may wait long for its
step), and the `starting` event."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from srtd.errors import LaunchError
from srtd.events import UnitState
from srtd.launch import ExitStatus, Handle
from srtd.supervisor._flag import Flag
from srtd.supervisor._restart import rotated_log

if TYPE_CHECKING:
    from srtd.supervisor._unit import UnitRunner


async def launch_attempt(runner: UnitRunner) -> bool:
    """Start the next attempt; False when the launch failed (the unit has ended)."""
    port = runner.port
    number = runner.restarts.count
    if number > 0:
        port.rotate_log(runner.log_path, rotated_log(runner.log_path, number))
    with anyio.CancelScope(shield=True):
        try:
            handle = await port.launch(runner.unit, attempt=number, log_path=runner.log_path)
        except (LaunchError, OSError) as e:
            return launch_failed(runner, e)
        # Recorded before anything can cancel us: a teardown now stops this attempt.
        runner.handle = handle
        runner.status = None
        runner.signalled = False
        runner.user_signal = None
        runner.attempt = number
    runner.settling = True
    try:
        await handle.settle()  # unshielded: srun may wait long for Slurm to create the step
    except LaunchError as e:
        runner.status = handle.poll() or ExitStatus(code=1)  # refused: nothing runs
        return launch_failed(runner, e)
    except anyio.get_cancelled_exc_class():
        _started(runner, handle, number)  # the journal shows what the teardown will stop
        raise
    finally:
        runner.settling = False
    _started(runner, handle, number)
    return True


def launch_failed(runner: UnitRunner, error: Exception) -> bool:
    runner.give_up(f"launch failed: {error}")
    return False


def _started(runner: UnitRunner, handle: Handle, number: int) -> None:
    runner.launched = True
    runner.displaced = False  # launched again after a replacement: dependants see its readiness
    runner.launched_at = runner.port.clock.now()
    runner.ready_now = False
    runner.clean_since = None
    runner.last_probe = None
    runner.ready_event = Flag()
    detail = {"log": str(runner.log_path)}
    if handle.step_id is not None:
        detail["step"] = handle.step_id  # under Slurm: what `scancel` and `squeue --steps` call it
    runner.emit(UnitState.STARTING, attempt=number, pid=handle.pid, detail=detail)
