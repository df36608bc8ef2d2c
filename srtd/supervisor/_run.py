"""`run()`: the synchronous entry point, with signal handling.

SIGTERM, SIGINT, SIGHUP and SIGUSR1 (the early warning of `sbatch --signal=B:USR1@N`)
request the graceful, tiered teardown; a SIGINT after a stop was already requested
(a second Ctrl-C) kills everything at once.  The handler only feeds a `Stop`: it runs
as an ordinary task reading `anyio.open_signal_receiver`, never inside a C-level
signal handler.  Signals that came before it listened (`srtd run` notes them from its
first moment: `srtd._early_signals`) are acted on first, in order, as if they had just come.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Unpack

import anyio
import anyio.abc

from srtd import _early_signals
from srtd.errors import SrtdError
from srtd.launch import Launcher, StopCause
from srtd.supervisor._job import JobOptions, JobResult, Service, supervise
from srtd.supervisor._teardown import EXPLAIN_WAIT, Stop

STOP_SIGNALS = _early_signals.STOP_SIGNALS


StopReason = Callable[[int], Awaitable[StopCause | None]]


async def relay_signals(
    stop: Stop,
    *,
    explain: StopReason | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Turn stop signals into requests on `stop` until cancelled.

    The stop is requested first; `explain(signum)` may then say why the signal came (the
    launcher knows: under Slurm a SIGUSR1 with little time left is the early warning), and
    that reason goes into the job's final event.
    """

    async def relay(signum: int) -> None:
        if stop.requested.is_set() and signum == signal.SIGINT:
            stop.kill(signum)
            return
        first = not stop.requested.is_set()
        stop.request(signum)  # first: the teardown never waits for the explanation
        if explain is not None and first:
            stop.explaining = True
            cause = None
            try:
                with anyio.move_on_after(EXPLAIN_WAIT):
                    cause = await explain(signum)
            finally:
                stop.explained.set()
            if cause is not None:
                stop.explain(cause.reason, time_limit=cause.time_limit)

    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        # the receiver holds the handlers now: what came while srtd was starting can be taken
        for signum in _early_signals.take():
            await relay(signum)
        async for signum in signals:
            await relay(signum)


def run(
    plan: object,
    launcher: Launcher,
    *,
    explain: StopReason | None = None,
    services: Sequence[Service] = (),
    **options: Unpack[JobOptions],
) -> int:
    """Supervise `plan` in a fresh event loop with signal handling; return the exit code.

    0 success; a terminal unit's worst code; 1 a critical failure; 128 + N when stopped
    by signal N.  An invalid plan (`PlanError`) or an unusable launcher or log directory
    (`LaunchError`) is raised once the signal relay has ended: the caller renders it and
    maps it to its exit code (`srtd.errors.exit_code_for`); nothing here prints.
    """
    from srtd.unit import Plan

    if not isinstance(plan, Plan):
        raise TypeError("run() needs a srtd.unit.Plan")

    async def main() -> int:
        stop = Stop()
        outcome: JobResult | SrtdError | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(partial(relay_signals, stop, explain=explain))
            try:
                outcome = await supervise(plan, launcher, stop=stop, services=services, **options)
            except SrtdError as e:
                outcome = e
            finally:
                tg.cancel_scope.cancel()
        if isinstance(outcome, SrtdError):
            raise outcome
        assert outcome is not None
        return outcome.exit_code

    return anyio.run(main)
