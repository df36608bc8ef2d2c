"""What follows an attempt: the restart policy's decision (back off and launch again, or
end for good: stopped, or failed, with what a failure means for the job)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srtd.events import UnitState
from srtd.launch import signal_name
from srtd.supervisor._attempt import AttemptEnd, ended
from srtd.supervisor._unit_stop import ended_first, stop_own
from srtd.unit import Unit

if TYPE_CHECKING:
    from srtd.supervisor._unit import UnitRunner


def ignored_detail(unit: Unit) -> dict[str, object] | None:
    """The `failed` event's detail of a unit whose failure lets the job go on (not critical,
    not terminal): `ignored`, and the console warns instead of reporting an error."""
    return {"ignored": True} if not unit.critical and not unit.terminal else None


def _judge_exit(runner: UnitRunner) -> tuple[bool, str]:
    """The attempt's process exited: journal it; (failed, why)."""
    status = runner.status
    assert status is not None
    runner.succeeded = runner.succeeded or status.code == 0
    before_ready = runner.unit.readiness is not None and not runner.ready_now
    reason = ended(status) + _user_signal_note(runner) + (" before it was ready" if before_ready else "")
    runner.emit(UnitState.EXITED, attempt=runner.attempt, exit_code=status.code, signal=status.signal, reason=reason)
    return status.failed or before_ready, reason


def _user_signal_note(runner: UnitRunner) -> str:
    """What an exit's reason adds when a person signalled the attempt (`srtd signal`): the
    restart policy judges the exit as any other, and the journal says who sent the signal."""
    if runner.user_signal is None or runner.status is None:
        return ""
    signum, sent_at = runner.user_signal
    if runner.status.signal == signum:
        return " (sent through srtd signal)"
    ago = runner.port.clock.now() - sent_at
    return f" ({signal_name(signum)} sent through srtd signal {ago:.0f} s before)"


async def after_attempt(runner: UnitRunner, end: AttemptEnd) -> bool:
    """Decide what follows an attempt.  True: launch again."""
    unit = runner.unit
    port = runner.port
    if end.kind == "exit" and port.stop_requested and not runner.signalled and not unit.on_teardown:
        ended_first(runner)
        return False
    if end.kind == "exit":
        failed, reason = _judge_exit(runner)
        status = runner.status
        if status is not None and status.node is not None:
            why_not = port.node_lost(runner.name, status.node, reason)
            if why_not is None:  # its node was replaced: it is launched on the spare
                end = AttemptEnd("replaced", reason, delay=0.0)
            elif why_not:
                reason += f"; {why_not}"  # the job's end says what to set
    else:
        failed = end.kind not in ("group", "requested", "replaced")
        reason = end.reason
    ran_clean = port.clock.now() - runner.clean_since if runner.clean_since is not None else None

    forced = end.kind in ("group", "requested", "replaced")  # a restart the policy does not decide
    wants = forced or runner.restarts.wants(failed)
    exhausted = not forced and runner.restarts.exhausted
    if wants and not exhausted and not port.stopping:
        await _restart(runner, end, reason, ran_clean)
        return True

    if failed and wants and exhausted:
        reason += f" (restarts exhausted: {runner.restarts.count} of {unit.restart.max_restarts})"
    if not failed:
        runner.end_as(UnitState.STOPPED, reason)
        if unit.terminal:
            runner.exit_for_job = 0
        return False
    if runner.live:
        if unit.critical:
            # The job stops at once; its teardown stops this process in its tier.
            runner.failure = reason
            runner.emit(UnitState.STOPPING, attempt=runner.attempt, reason=reason, detail=end.detail)
            port.fail(runner.name, reason)
            return False
        await stop_own(runner, reason, end.detail)
    runner.failure = reason
    # a failure the job goes on after (a non-critical unit) says so: the console warns
    runner.end_as(UnitState.FAILED, reason, ignored_detail(unit))
    if unit.terminal:
        status = runner.status
        code = status.shell_code if status is not None and end.kind == "exit" else 1
        runner.exit_for_job = code or 1
    elif unit.critical:
        port.fail(runner.name, reason)
    return False


async def _restart(runner: UnitRunner, end: AttemptEnd, reason: str, ran_clean: float | None) -> None:
    """Stop what is left of the attempt, back off, and (with a group) wait for it."""
    unit = runner.unit
    own = runner.restarts.schedule(ran_clean)
    delay = end.delay if end.delay is not None else own
    if unit.group is not None and end.kind != "group":
        # Siblings start stopping now, concurrently with our own stop and backoff.
        runner.port.restart_group(runner.name, reason, delay)
    if runner.live:
        await stop_own(runner, reason, end.detail)
    number = runner.restarts.count
    if end.kind == "replaced" and unit.results is not None:
        runner.port.set_aside(runner.name, number, reason)  # what the interrupted attempt measured
    runner.emit(
        UnitState.BACKOFF,
        attempt=number,
        reason=f"restart {number} of {unit.restart.max_restarts} in {delay:g} s: {reason}",
        detail={"delay": delay, "restart": number},
    )
    if unit.group is not None:
        await runner.port.group_relaunch(runner.name)
    else:
        await runner.port.clock.sleep(delay)
