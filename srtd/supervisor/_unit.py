"""One unit's lifecycle: wait for its dependencies, launch, watch, restart, end.

    pending -> waiting -> starting -> ready -> (exited -> backoff -> starting)* -> ...
    ... -> stopped | failed                   (stopping on the way when srtd stops it)

`UnitRunner.run` is one task of the job's task group.  An attempt runs three watchers
concurrently: the process exit, the readiness probe (with its timeout) and the log
watcher (fatal patterns and the log probe, fed line by line by the file's tailer);
`run_timeout` adds a fourth, `liveness` a fifth (idle until the attempt is ready,
see `_liveness.py`).  Whichever ends the attempt first wins and cancels the
others.  Then the restart policy decides: back off and launch again, or end for good.

The job's teardown cancels this task (`scope`) and then stops a live process itself,
tier by tier (`terminate`).  `Launcher.start` is shielded from that cancellation, so a
process is never started without its handle being recorded; the wait that follows
(`Handle.settle`: srun until Slurm creates the step) is not, so a teardown never waits
for it.  The `starting` event comes after it (with the step id), or when it is cut short.
"""

from __future__ import annotations

import contextlib
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from srtd.errors import LaunchError
from srtd.events import FINAL_UNIT_STATES, Event, UnitState
from srtd.launch import ExitStatus, Handle, signal_name
from srtd.supervisor._clock import within
from srtd.supervisor._liveness import LivenessWatcher
from srtd.supervisor._probes import NudgeBucket, ProbePacer, check, describe
from srtd.supervisor._restart import RestartTracker, rotated_log
from srtd.supervisor._tail import LogLine, Tailer
from srtd.unit import (
    Condition,
    Edge,
    FileProbe,
    HttpProbe,
    Liveness,
    LogProbe,
    Readiness,
    TcpProbe,
    Unit,
    WorkerCountProbe,
)

if TYPE_CHECKING:
    from srtd.supervisor._port import JobPort

KILL_REAP = 2.0  # real seconds to wait for a process after SIGKILL
REQUESTED = "restart requested"  # the reason of a restart asked for through `srtd attach`


def ended(status: ExitStatus) -> str:
    """`exited with exit code 3`, `was killed by SIGKILL`, `node node2 lost (...)`."""
    if status.lost is not None:
        return status.lost
    if status.signal is not None:
        return f"was {status.describe()}"
    return f"exited with {status.describe()}"


class Verdict(Enum):
    OK = "ok"
    WAIT = "wait"
    FAILED = "failed"


EndKind = Literal["exit", "fatal", "not-ready", "run-timeout", "group", "unhealthy", "requested"]


@dataclass(frozen=True)
class AttemptEnd:
    kind: EndKind
    reason: str = ""
    delay: float | None = None  # group restarts: the backoff the group shares
    detail: dict[str, Any] | None = None  # journaled with the event that starts stopping it


class UnitRunner:
    def __init__(self, port: JobPort, unit: Unit, log_path: Path) -> None:
        self.port = port
        self.unit = unit
        self.name = unit.name
        self.log_path = log_path
        self.fatal = [re.compile(p) for p in unit.fatal_patterns]
        probe = unit.readiness.probe if unit.readiness is not None else None
        self.log_ready = re.compile(probe.pattern) if isinstance(probe, LogProbe) else None
        self.restarts = RestartTracker(unit.restart)
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
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
        self.waiting_on: tuple[Edge, ...] = ()
        self.last_probe: str | None = None
        self._finish: Callable[[AttemptEnd], None] | None = None
        self._settling = False  # launched, awaiting `Handle.settle`
        self._pending_end: AttemptEnd | None = None  # an interrupt that came while settling
        self._ready_event = anyio.Event()
        self._nudged = anyio.Event()

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

    def emit(self, state: UnitState, **fields: object) -> Event:
        return self.port.emit(self.name, state, **fields)

    def _final(self, state: UnitState, reason: str, detail: dict[str, object] | None = None) -> None:
        status = self.status
        self.emit(
            state,
            attempt=self.attempt if self.launched else None,
            exit_code=status.code if status is not None else None,
            signal=status.signal if status is not None else None,
            reason=reason,
            detail=detail,
        )

    def _ended_first(self) -> None:
        """The job is stopping and this attempt ended before srtd signalled it (under Slurm:
        `scancel <job>` or the time limit signalled every step at once)."""
        status = self.status
        assert status is not None
        self._final(
            UnitState.STOPPED,
            f"ended before srtd stopped it ({ended(status)}): stopped from outside",
            {"ended_before_stop": True},
        )

    # ---------------------------------------------------------------- dependencies

    def verdict(self, condition: Condition) -> Verdict:
        """Does this unit satisfy `condition` for a dependant, now?"""
        if self.failure is not None or self.state is UnitState.FAILED:
            return Verdict.FAILED
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
            for edge in self.unit.after:
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

    async def run(self) -> None:
        try:
            with self.scope:
                await self._lifecycle()
        finally:
            self.done.set()

    async def _lifecycle(self) -> None:
        while True:
            problem = await self._wait_for_dependencies()
            if problem is not None:
                self.failure = problem
                self._final(UnitState.FAILED, problem)
                if self.unit.terminal:
                    self.exit_for_job = 1
                if self.unit.critical:
                    self.port.fail(self.name, problem)
                return
            end = await self._attempt()
            if end is None or not await self._after(end):
                return

    # ---------------------------------------------------------------- one attempt

    async def _launch(self) -> bool:
        number = self.restarts.count
        if number > 0:
            self.port.rotate_log(self.log_path, rotated_log(self.log_path, number))
        with anyio.CancelScope(shield=True):
            try:
                handle = await self.port.launch(self.unit, attempt=number, log_path=self.log_path)
            except (LaunchError, OSError) as e:
                return self._launch_failed(e)
            # Recorded before anything can cancel us: a teardown now stops this attempt.
            self.handle = handle
            self.status = None
            self.signalled = False
            self.attempt = number
        self._settling = True
        try:
            await handle.settle()  # unshielded: srun may wait long for Slurm to create the step
        except LaunchError as e:
            self.status = handle.poll() or ExitStatus(code=1)  # refused: nothing runs
            return self._launch_failed(e)
        except anyio.get_cancelled_exc_class():
            self._started(handle, number)  # the journal shows what the teardown will stop
            raise
        finally:
            self._settling = False
        self._started(handle, number)
        return True

    def _launch_failed(self, error: Exception) -> bool:
        reason = f"launch failed: {error}"
        self.failure = reason
        self._final(UnitState.FAILED, reason)
        if self.unit.terminal:
            self.exit_for_job = 1
        if self.unit.critical:
            self.port.fail(self.name, reason)
        return False

    def _started(self, handle: Handle, number: int) -> None:
        self.launched = True
        self.launched_at = self.port.clock.now()
        self.ready_now = False
        self.clean_since = None
        self.last_probe = None
        self._ready_event = anyio.Event()
        detail = {"log": str(self.log_path)}
        if handle.step_id is not None:
            detail["step"] = handle.step_id  # under Slurm: what `scancel` and `squeue --steps` call it
        self.emit(UnitState.STARTING, attempt=number, pid=handle.pid, detail=detail)

    async def _attempt(self) -> AttemptEnd | None:
        if not await self._launch():
            return None
        assert self.handle is not None
        handle = self.handle
        if self._pending_end is not None:  # interrupted while it settled
            pending, self._pending_end = self._pending_end, None
            return pending
        tailer = self.port.tailer(self.log_path)
        generation = tailer.generation
        scope = anyio.CancelScope()
        end: AttemptEnd | None = None

        def finish(result: AttemptEnd) -> None:
            nonlocal end
            if end is None:
                end = result
                scope.cancel()

        def on_line(line: LogLine) -> None:
            self._on_line(generation, line, finish)

        self._finish = finish
        try:
            with tailer.watch(on_line), scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch_exit, handle, tailer, finish)
                    if self.unit.readiness is not None:
                        tg.start_soon(self._watch_readiness, self.unit.readiness, finish)
                    else:
                        self._mark_ready()
                    if self.unit.run_timeout is not None:
                        tg.start_soon(self._run_timer, self.unit.run_timeout, finish)
                    if self.unit.liveness is not None:
                        tg.start_soon(self._watch_liveness, self.unit.liveness, tailer, generation, finish)
        finally:
            self._finish = None
        assert end is not None
        return end

    def interrupt(self, end: AttemptEnd) -> bool:
        """End the running attempt from outside (a group restart).  False if none runs."""
        if not self.live:
            return False
        if self._finish is None:
            if not self._settling:
                return False
            self._pending_end = end  # still settling (srun awaiting its step): ends it right after
            return True
        self._finish(end)
        return True

    def request_restart(self) -> bool:
        """A restart asked for from outside (`srtd restart`): the running attempt ends
        and goes through the restart path at once, whatever the policy; it counts as a
        restart.  False if no attempt runs."""
        return self.interrupt(AttemptEnd("requested", REQUESTED, delay=0.0))

    def _on_line(self, generation: int, line: LogLine, finish: Callable[[AttemptEnd], None]) -> None:
        if line.generation < generation:
            return  # a line of an earlier attempt's file
        text = line.text
        if self.unit.echo:
            self.port.echo(self.name, text)
        if not self.ready_now:
            if self.log_ready is None:
                self._nudged.set()  # servers announce that they listen: probe now
            elif self.log_ready.search(text):
                self._mark_ready()
        for pattern in self.fatal:
            if pattern.search(text):
                self.port.record_fatal(self.name, text)
                finish(AttemptEnd("fatal", f"fatal log line: {text}"))
                return

    async def _watch_exit(self, handle: Handle, tailer: Tailer, finish: Callable[[AttemptEnd], None]) -> None:
        status = await handle.wait()
        self.status = status
        with contextlib.suppress(OSError):
            tailer.poll()  # judge what it wrote before it exited before judging the exit
        finish(AttemptEnd("exit"))

    async def _watch_readiness(self, readiness: Readiness, finish: Callable[[AttemptEnd], None]) -> None:
        probe = readiness.probe
        clock = self.port.clock

        async def until_ready() -> None:
            if isinstance(probe, LogProbe):
                await self._ready_event.wait()
                return
            async with anyio.create_task_group() as tg:
                if isinstance(probe, WorkerCountProbe):
                    tg.start_soon(self._nudge_on_changes)  # a worker became ready: ask the gate
                await self._probe_until_ready(probe, readiness.interval_seconds)
                tg.cancel_scope.cancel()

        if await within(clock, readiness.timeout_seconds, until_ready):
            self._mark_ready()
            return
        reason = f"not ready within {readiness.timeout_seconds:g} s"
        if self.last_probe:
            reason += f" (last probe: {describe(probe, self._probe_host())}: {self.last_probe})"
        finish(AttemptEnd("not-ready", reason))

    async def _watch_liveness(
        self, liveness: Liveness, tailer: Tailer, generation: int, finish: Callable[[AttemptEnd], None]
    ) -> None:
        """From ready on (never before), until the attempt ends: is it still alive?"""
        await self._ready_event.wait()
        probe = liveness.probe
        host = None if probe is None or isinstance(probe, LogProbe) else self.port.address(probe.node)
        watcher = LivenessWatcher(
            liveness, clock=self.port.clock, http=self.port.http, host=host, generation=generation
        )
        with tailer.watch(watcher.on_line):
            verdict = await watcher.run(lambda: self.port.stopping)
        finish(AttemptEnd("unhealthy", verdict.reason, detail={"unhealthy": verdict.detail()}))

    async def _probe_until_ready(
        self, probe: TcpProbe | HttpProbe | FileProbe | WorkerCountProbe, interval: float
    ) -> None:
        """Probe now, then when the pacer's clock says so or a nudge is granted."""
        clock = self.port.clock
        host = self.port.address(probe.node)
        pacer = ProbePacer(probe, interval, clock.now())
        bucket = NudgeBucket(anyio.current_time())
        while not self.ready_now:
            self._nudged = anyio.Event()  # nudges from now on count for the next probe
            result = await check(probe, host=host, client=self.port.http)
            if result.ok:
                return
            self.last_probe = result.detail
            delay = pacer.after(clock.now(), result)
            due = clock.now() + delay
            while True:
                nudged = self._nudged
                if await within(clock, due - clock.now(), nudged.wait):
                    if not pacer.nudge(clock.now()):
                        self._nudged = anyio.Event()  # held: wait for the clock
                        continue
                    await anyio.sleep(bucket.wait(anyio.current_time()))
                    bucket.take(anyio.current_time())
                break

    async def _nudge_on_changes(self) -> None:
        while True:
            await self.port.changed()
            self._nudged.set()

    def _probe_host(self) -> str | None:
        probe = self.unit.readiness.probe if self.unit.readiness is not None else None
        if probe is None or isinstance(probe, LogProbe):
            return None
        return self.port.address(probe.node)

    async def _run_timer(self, seconds: float, finish: Callable[[AttemptEnd], None]) -> None:
        await self.port.clock.sleep(seconds)
        finish(AttemptEnd("run-timeout", f"did not finish within {seconds:g} s"))

    def _mark_ready(self) -> None:
        if self.ready_now or self.launched_at is None:
            return
        self.ready_now = True
        self.ever_ready = True
        now = self.port.clock.now()
        self.clean_since = now
        self.ready_seconds = now - self.launched_at
        self.emit(UnitState.READY, attempt=self.attempt, detail={"seconds": round(self.ready_seconds, 3)})
        self._ready_event.set()

    # ---------------------------------------------------------------- after an attempt

    async def _after(self, end: AttemptEnd) -> bool:
        """Decide what follows an attempt.  True: launch again."""
        unit = self.unit
        clock = self.port.clock
        if end.kind == "exit" and self.port.stop_requested and not self.signalled:
            self._ended_first()
            return False
        if end.kind == "exit":
            status = self.status
            assert status is not None
            self.succeeded = self.succeeded or status.code == 0
            before_ready = unit.readiness is not None and not self.ready_now
            failed = status.failed or before_ready
            reason = ended(status) + (" before it was ready" if before_ready else "")
            self.emit(
                UnitState.EXITED,
                attempt=self.attempt,
                exit_code=status.code,
                signal=status.signal,
                reason=reason,
            )
        else:
            failed = end.kind not in ("group", "requested")
            reason = end.reason
        ran_clean = clock.now() - self.clean_since if self.clean_since is not None else None

        forced = end.kind in ("group", "requested")  # a restart the policy does not decide
        wants = forced or self.restarts.wants(failed)
        exhausted = not forced and self.restarts.exhausted
        if wants and not exhausted and not self.port.stopping:
            await self._restart(end, reason, ran_clean)
            return True

        if failed and wants and exhausted:
            reason += f" (restarts exhausted: {self.restarts.count} of {unit.restart.max_restarts})"
        if failed:
            if self.live:
                if unit.critical:
                    # The job stops at once; its teardown stops this process in its tier.
                    self.failure = reason
                    self.emit(UnitState.STOPPING, attempt=self.attempt, reason=reason, detail=end.detail)
                    self.port.fail(self.name, reason)
                    return False
                await self._stop_own(reason, end.detail)
            self.failure = reason
            self._final(UnitState.FAILED, reason)
            if unit.terminal:
                status = self.status
                code = status.shell_code if status is not None and end.kind == "exit" else 1
                self.exit_for_job = code or 1
            elif unit.critical:
                self.port.fail(self.name, reason)
        else:
            self._final(UnitState.STOPPED, reason)
            if unit.terminal:
                self.exit_for_job = 0
        return False

    async def _restart(self, end: AttemptEnd, reason: str, ran_clean: float | None) -> None:
        """Stop what is left of the attempt, back off, and (with a group) wait for it."""
        unit = self.unit
        own = self.restarts.schedule(ran_clean)
        delay = end.delay if end.delay is not None else own
        if unit.group is not None and end.kind != "group":
            # Siblings start stopping now, concurrently with our own stop and backoff.
            self.port.restart_group(self.name, reason, delay)
        if self.live:
            await self._stop_own(reason, end.detail)
        number = self.restarts.count
        self.emit(
            UnitState.BACKOFF,
            attempt=number,
            reason=f"restart {number} of {unit.restart.max_restarts} in {delay:g} s: {reason}",
            detail={"delay": delay, "restart": number},
        )
        if unit.group is not None:
            await self.port.group_relaunch(self.name)
        else:
            await self.port.clock.sleep(delay)

    # ---------------------------------------------------------------- stopping

    async def _signal_and_wait(self) -> bool:
        """SIGTERM, wait up to `terminate_timeout`, then SIGKILL.  True if it had to kill."""
        handle = self.handle
        assert handle is not None

        async def wait() -> None:
            self.status = await handle.wait()

        self.signalled = True
        await handle.signal(signal.SIGTERM)
        if await within(self.port.clock, self.unit.terminate_timeout, wait):
            return False
        await handle.kill()
        with anyio.move_on_after(KILL_REAP):
            await wait()
        return True

    async def _stop_own(self, reason: str, detail: dict[str, Any] | None = None) -> None:
        """Stop a live attempt that failed (or must restart) while the job goes on."""
        self.emit(UnitState.STOPPING, attempt=self.attempt, reason=reason, detail=detail)
        killed = await self._signal_and_wait()
        status = self.status
        note = f"killed after {self.unit.terminate_timeout:g} s" if killed else "stopped"
        self.emit(
            UnitState.EXITED,
            attempt=self.attempt,
            exit_code=status.code if status is not None else None,
            signal=status.signal if status is not None else None,
            reason=f"{note}: {reason}",
        )

    async def terminate(self) -> None:
        """Teardown of this unit (its task is already cancelled): end it for good."""
        if self.final:
            return
        if not self.live:
            state = UnitState.FAILED if self.failure else UnitState.STOPPED
            self._final(state, self.failure or "job stopping")
            return
        assert self.handle is not None
        already = self.handle.poll()
        if already is not None and not self.signalled and self.port.stop_requested:
            self.status = already
            self._ended_first()
            return
        if self.state is not UnitState.STOPPING:
            self.emit(UnitState.STOPPING, attempt=self.attempt, reason="job stopping")
        killed = await self._signal_and_wait()
        self.killed_after_timeout = killed
        if self.status is None:
            note = "did not exit after SIGKILL"
        elif killed:
            note = f"killed after {self.unit.terminate_timeout:g} s ({signal_name(signal.SIGTERM)} not obeyed)"
        elif self.status.lost is not None:
            note = f"left to Slurm: {self.status.lost}"  # its node went while it was being stopped
        else:
            note = "stopped"
        if self.failure:
            self._final(UnitState.FAILED, self.failure)
        else:
            self._final(UnitState.STOPPED, note)
