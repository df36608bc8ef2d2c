"""Teardown by tier, and the stop request that starts it.

Tier 0 (workers, frontends, sidecars), then 1 (Mooncake master and stores), then 2
(etcd, NATS).  Inside a tier every live unit gets SIGTERM at once and is waited for
up to its `terminate_timeout`, then SIGKILLed; the next tier starts when the tier is
down.  Units without a live process (waiting, in backoff, never started) become
`stopped` at once.  The whole teardown therefore takes at most the sum over tiers of
the tier's largest terminate timeout, plus a short reap after a SIGKILL.  A kill
request (a second Ctrl-C) SIGKILLs every live process at once, whatever its tier.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from srtd.errors import exit_for_signal
from srtd.events import JobState, UnitState
from srtd.launch import Stray, signal_name

if TYPE_CHECKING:
    from srtd.supervisor._journal import Journal
    from srtd.supervisor._unit import UnitRunner


EXPLAIN_WAIT = 5.0  # seconds the launcher gets to explain a stop signal (e.g. asking Slurm for the time left);
# the teardown never waits for it, only the final event does, and only while it is pending


class Stop:
    """A request to stop the job: what a signal handler sets, and nothing more.

    Create it inside the event loop.  `request(signum)` starts the graceful, tiered
    teardown (the job ends as cancelled, exit code 128 + signum; 143 when no signal is
    given); `kill()` also SIGKILLs everything at once.
    """

    def __init__(self) -> None:
        self.requested = anyio.Event()
        self.killed = anyio.Event()
        self.signum: int | None = None
        self.reason: str | None = None
        self.time_limit = False  # the job stops because its time is up (Slurm's early warning)
        self.explaining = False  # the launcher is asked why the signal came
        self.explained = anyio.Event()  # ... and has answered (or given up)

    def request(self, signum: int | None = None, reason: str | None = None, *, time_limit: bool = False) -> None:
        if self.requested.is_set():
            return
        self.signum = signum
        self.time_limit = time_limit
        if reason is None:
            reason = f"received {signal_name(signum)}" if signum is not None else "stop requested"
        self.reason = reason
        self.requested.set()

    def explain(self, reason: str, *, time_limit: bool = False) -> None:
        """Say, after the fact, why the stop came (the launcher's explanation of a signal).

        The request itself never waits for this: the teardown has already begun when the
        launcher (under Slurm, an squeue call) answers.  The job's final event carries it."""
        if self.requested.is_set():
            self.reason = reason
            self.time_limit = time_limit

    async def explanation(self) -> None:
        """Until a pending explanation has come (at most `EXPLAIN_WAIT`)."""
        if self.explaining:
            with anyio.move_on_after(EXPLAIN_WAIT):
                await self.explained.wait()

    def kill(self, signum: int | None = None) -> None:
        self.request(signum, f"received {signal_name(signum)} twice" if signum is not None else None)
        self.killed.set()

    @property
    def exit_code(self) -> int:
        return exit_for_signal(self.signum if self.signum is not None else signal.SIGTERM)


async def teardown(
    every: Sequence[UnitRunner], stop: Stop, end_strays: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Every unit down, tier by tier; then what the units left outside their process groups
    (`end_strays`, the launcher's), so that the host teardown steps, the last tier, run once
    every process of the job's units is gone; then whatever a teardown step left."""
    hooks = [r for r in every if r.unit.on_teardown]
    runners = [r for r in every if not r.unit.on_teardown]
    # 1. Nothing launches, probes, watches or backs off any more.
    for runner in runners:
        runner.stop_task()
    for runner in runners:
        await runner.done.wait()
    # 2. Units without a process end now.
    for runner in runners:
        if not runner.final and not runner.live:
            await runner.terminate()
    # 3. The rest tier by tier.

    async def kill_on_request() -> None:
        await stop.killed.wait()
        for runner in every:
            if runner.live and runner.handle is not None:
                await runner.handle.kill()

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_on_request)
        for tier in sorted({r.unit.tier for r in runners}):
            members = [r for r in runners if r.unit.tier == tier and not r.final]
            if not members:
                continue
            async with anyio.create_task_group() as tier_group:
                for runner in members:
                    tier_group.start_soon(runner.terminate)
        if end_strays is not None:
            await end_strays()
        await run_teardown_steps(hooks, touched=any(r.launched for r in runners))
        if end_strays is not None and any(r.launched for r in hooks):
            await end_strays()
        tg.cancel_scope.cancel()


def journal_stray(journal: Journal, stray: Stray) -> None:
    """A stray the launcher found: a job event (docs/events.md, `detail.stray`), which the
    console shows as a warning."""
    grace = f"SIGTERM, then SIGKILL after {stray.grace:g} s" if stray.grace > 0 else "SIGKILL"
    reason = f"{stray.describe()}: ending it ({grace})"
    journal.emit(None, JobState.STOPPING, reason=reason, detail={"stray": stray.detail()})


async def run_teardown_steps(hooks: Sequence[UnitRunner], *, touched: bool) -> None:
    """The last tiers: the host teardown steps, launched together once every other tier is down,
    then the log upload (`postprocess`) once they have ended: one tier after another.

    Each ends by itself, or at its `run_timeout` (stopped, and failed with one line); a
    second Ctrl-C kills them like any live process.  A job that launched nothing has
    changed no node: its teardown steps are not run.
    """
    if not touched:
        for runner in hooks:
            runner.end_as(UnitState.STOPPED, "not run: the job launched nothing")
        return
    for tier in sorted({r.unit.tier for r in hooks}):  # the host teardown steps, then the log upload
        async with anyio.create_task_group() as tg:
            for runner in hooks:
                if runner.unit.tier == tier:
                    tg.start_soon(runner.run)
