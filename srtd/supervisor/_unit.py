"""One unit's lifecycle: wait for its dependencies, launch, watch, restart, end.

    pending -> waiting -> starting -> ready -> (exited -> backoff -> starting)* -> ...
    ... -> stopped | failed                   (stopping on the way when srtd stops it)

`UnitRunner.run` is one task of the job's task group.  An attempt runs its watchers
concurrently: the process exit (awaited by the unit's task itself), the log watcher
(fatal patterns and the log probe, fed line by line by the file's tailer) and, each in
a task when the unit has it, the readiness probe (with its timeout), `run_timeout` and
`liveness` (idle until the attempt is ready, see `_liveness.py`).  Whichever ends the
attempt first wins and cancels the others.  Then the restart policy decides: back off
and launch again, or end for good.

The job's teardown cancels this task (`task`, the handle `start_soon` gave: its cancel
scope is the task's own, so a unit keeps no second one) and then stops a live process itself,
tier by tier (`terminate`).  `Launcher.start` is shielded from that cancellation, so a
process is never started without its handle being recorded; the wait that follows
(`Handle.settle`: srun until Slurm creates the step) is not, so a teardown never waits
for it.  The `starting` event comes after it (with the step id), or when it is cut short.

`UnitRunner` keeps the unit's state and its dependencies; the rest lives beside it along
its seams: launching an attempt (`_unit_launch`), watching it (`_unit_watch`), the
restart decision after an attempt (`_unit_after`) and stopping a process (`_unit_stop`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import anyio

from srtd.events import FINAL_UNIT_STATES, Event, EventFacts, UnitState
from srtd.launch import ExitStatus, Handle
from srtd.patterns import compile_log_pattern
from srtd.supervisor._attempt import REQUESTED, AttemptEnd, Verdict
from srtd.supervisor._flag import Flag
from srtd.supervisor._restart import RestartTracker
from srtd.supervisor._unit_after import after_attempt, ignored_detail
from srtd.supervisor._unit_launch import launch_attempt
from srtd.supervisor._unit_stop import terminate
from srtd.supervisor._unit_watch import Attempt, watch_attempt
from srtd.unit import Condition, Edge, LogProbe, Unit

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from srtd.supervisor._port import JobPort


class UnitRunner:
    """One unit of the job: its state, its dependencies, its attempts (one task)."""

    __slots__ = (  # a job keeps one per unit: no dict each
        *("port", "unit", "name", "log_path", "fatal", "log_ready", "restarts", "task", "done", "handle"),
        *("status", "attempt", "launched", "ever_ready", "ready_now", "succeeded", "failure", "root_cause"),
        *("exit_for_job", "launched_at", "clean_since", "ready_seconds", "killed_after_timeout", "signalled"),
        *("user_signal", "waiting_on", "displaced", "rejoin", "last_probe", "watching", "settling"),
        *("_pending_end", "ready_event", "nudged"),
    )

    def __init__(self, port: JobPort, unit: Unit, log_path: Path) -> None:
        self.port = port
        self.unit = unit
        self.name = unit.name
        self.log_path = log_path
        self.fatal = tuple(compile_log_pattern(p) for p in unit.fatal_patterns)
        probe = unit.readiness.probe if unit.readiness is not None else None
        self.log_ready = compile_log_pattern(probe.pattern) if isinstance(probe, LogProbe) else None
        self.restarts = RestartTracker(unit.restart)
        self.task: anyio.TaskHandle[None] | None = None  # once started in the job's task group
        self.done = Flag()
        self.handle: Handle | None = None
        self.status: ExitStatus | None = None
        self.attempt = 0
        self.launched = False
        self.ever_ready = False
        self.ready_now = False
        self.succeeded = False
        self.failure: str | None = None  # why it failed (set before the process is gone)
        self.root_cause: str | None = None  # the unit whose failure this one inherited
        self.exit_for_job: int | None = None  # terminal units: the code they hand the job
        self.launched_at: float | None = None
        self.clean_since: float | None = None
        self.ready_seconds: float | None = None
        self.killed_after_timeout = False
        self.signalled = False  # srtd sent this attempt SIGTERM or SIGKILL
        self.user_signal: tuple[int, float] | None = None  # `srtd signal` to this attempt: (signum, when)
        self.waiting_on: tuple[Edge, ...] = ()
        # a replacement (`_replacing.py`): moved or restarted, not yet launched again (dependants
        # wait), and the units a disrupted benchmark waits for before it runs again
        self.displaced = False
        self.rejoin: tuple[Edge, ...] = ()
        self.last_probe: str | None = None
        self.watching: Attempt | None = None  # the running attempt, once launched and settled
        self.settling = False  # launched, awaiting `Handle.settle`
        self._pending_end: AttemptEnd | None = None  # an interrupt that came while settling
        self.ready_event = Flag()
        self.nudged = Flag()

    # ---------------------------------------------------------------- state

    @property
    def state(self) -> UnitState:
        return self.port.unit_state(self.name)

    @property
    def final(self) -> bool:
        return self.state in FINAL_UNIT_STATES

    @property
    def live(self) -> bool:
        """Has a launched attempt that has not been seen to end."""
        return self.handle is not None and self.status is None

    def emit(self, state: UnitState, **facts: Unpack[EventFacts]) -> Event:
        return self.port.emit(self.name, state, **facts)

    def end_as(self, state: UnitState, reason: str, detail: dict[str, object] | None = None) -> None:
        status = self.status
        self.emit(
            state,
            attempt=self.attempt if self.launched else None,
            exit_code=status.code if status is not None else None,
            signal=status.signal if status is not None else None,
            reason=reason,
            detail=detail,
        )

    def give_up(self, reason: str) -> None:
        """The unit fails before an attempt runs (a dependency failed, the launch failed)."""
        self.failure = reason
        self.end_as(UnitState.FAILED, reason, ignored_detail(self.unit))
        if self.unit.terminal:
            self.exit_for_job = 1
        if self.unit.critical:
            self.port.fail(self.name, reason)

    # ---------------------------------------------------------------- dependencies

    def verdict(self, condition: Condition) -> Verdict:
        """Does this unit satisfy `condition` for a dependant, now?"""
        if condition is Condition.ENDED:
            # whatever the outcome, unless it ends the job: then nothing after it launches
            if self.final and not (self.state is UnitState.FAILED and self.unit.critical):
                return Verdict.OK
            return Verdict.WAIT
        if self.failure is not None or self.state is UnitState.FAILED:
            return Verdict.FAILED
        if self.displaced:
            return Verdict.WAIT
        final = self.final
        if condition is Condition.STARTED:
            ok = self.launched
        elif condition is Condition.READY:
            ok = self.state is UnitState.READY or (final and self.ever_ready)
        else:
            ok = self.succeeded
        if ok:
            return Verdict.OK
        return Verdict.FAILED if final else Verdict.WAIT

    def why_not(self, condition: Condition) -> str:
        if self.failure is not None or self.state is UnitState.FAILED:
            return f"dependency {self.name} failed"
        if condition is Condition.SUCCEEDED:
            return f"dependency {self.name} ended without succeeding"
        return f"dependency {self.name} ended before it was {condition.value}"

    async def _wait_for_dependencies(self) -> str | None:
        """None once every `after` edge holds; the reason if one never can."""
        while True:
            blocked: list[Edge] = []
            for edge in (*self.unit.after, *self.rejoin):
                dep = self.port.peer(edge.unit)
                verdict = dep.verdict(edge.condition)
                if verdict is Verdict.FAILED:
                    self.root_cause = dep.root_cause or dep.name
                    return dep.why_not(edge.condition)
                if verdict is Verdict.WAIT:
                    blocked.append(edge)
            self.waiting_on = tuple(blocked)
            if not blocked:
                return None
            if self.state is not UnitState.WAITING:
                self.emit(
                    UnitState.WAITING,
                    detail={"after": [f"{e.unit} ({e.condition.value})" for e in blocked]},
                )
            await self.port.changed()

    # ---------------------------------------------------------------- the task

    def start(self, tg: TaskGroup) -> None:
        """The unit's task in `tg`; `stop_task` cancels it."""
        self.task = tg.start_soon(self.run, name=self.name)

    def stop_task(self) -> None:
        """Nothing launches, probes, watches or backs off any more (`done` once it has ended)."""
        if self.task is not None:
            self.task.cancel()

    async def run(self) -> None:
        """Wait, launch, watch, decide; again until the unit ends.  One coroutine frame for
        what were three: a job keeps one such chain per unit for its whole life."""
        try:
            while True:
                problem = await self._wait_for_dependencies()
                if problem is not None:
                    self.give_up(problem)
                    return
                if not await launch_attempt(self):
                    return
                assert self.handle is not None
                end, self._pending_end = self._pending_end, None  # interrupted while it settled
                if end is None:
                    end = await watch_attempt(self, self.handle)
                if not await after_attempt(self, end):
                    return
        finally:
            self.done.set()

    # ---------------------------------------------------------------- one attempt, from outside

    def interrupt(self, end: AttemptEnd) -> bool:
        """End the running attempt from outside (a group restart).  False if none runs."""
        if not self.live:
            return False
        if self.watching is None:
            if not self.settling:
                return False
            self._pending_end = end  # still settling (srun awaiting its step): ends it right after
            return True
        self.watching.finish(end)
        return True

    def request_restart(self) -> bool:
        """A restart asked for from outside (`srtd restart`): the running attempt ends
        and goes through the restart path at once, whatever the policy; it counts as a
        restart.  False if no attempt runs."""
        return self.interrupt(AttemptEnd("requested", REQUESTED, delay=0.0))

    def mark_ready(self) -> None:
        if self.ready_now or self.launched_at is None:
            return
        self.ready_now = True
        self.ever_ready = True
        now = self.port.clock.now()
        self.clean_since = now
        self.ready_seconds = now - self.launched_at
        self.emit(UnitState.READY, attempt=self.attempt, detail={"seconds": round(self.ready_seconds, 3)})
        self.ready_event.set()

    # ---------------------------------------------------------------- stopping

    async def terminate(self) -> None:
        """Teardown of this unit (its task is already cancelled): end it for good."""
        await terminate(self)
