"""The job: every unit's task, the decision when to end, the teardown, the report.

`supervise()` runs one `Plan` to its end and returns a `JobResult`.  The job ends
- when every terminal unit has ended: the worst exit code wins (a terminal unit
  killed by signal N counts as 128 + N);
- on a critical failure: exit 1, the culprit, its exit or matched line and log tail;
- on a stop request (a signal): exit 128 + signum, state `cancelled`;
- without terminal units and without `plan.hold`: when every unit has ended (exit 0:
  non-critical failures are recorded, not fatal);
- with `plan.hold` (and no terminal units): only by a stop request or a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream

from srtd.errors import EXIT_JOB_FAILED, EXIT_NO_RESULTS, EXIT_OK, ControlError, LaunchError, PlanError, UsageError
from srtd.events import JOURNAL_FORMAT, Event, JobState, JobView, UnitState
from srtd.launch import ExitStatus, Handle, Launcher
from srtd.supervisor._clock import Clock, SystemClock, wait_any
from srtd.supervisor._console import (
    Console,
    NullConsole,
    ProgressRow,
    SummaryRow,
    TerminalConsole,
)
from srtd.supervisor._journal import Journal, Listener
from srtd.supervisor._postmortem import UnitLog, culprit_block, write_postmortem
from srtd.supervisor._probes import describe
from srtd.supervisor._results import ResultsWatch
from srtd.supervisor._tail import LogLine, Tailer
from srtd.supervisor._teardown import Stop, teardown
from srtd.supervisor._unit import AttemptEnd, UnitRunner
from srtd.supervisor._watch import WATCH_ENV, LogWatcher, WatchMode, open_watcher, watch_mode
from srtd.unit import LogProbe, Plan, Unit, within

JOURNAL_NAME = "events.jsonl"
POSTMORTEM_NAME = "postmortem.txt"


@dataclass
class JobResult:
    exit_code: int
    state: JobState
    reason: str | None
    culprit: str | None  # the unit that failed the job, or the terminal unit with the worst code
    view: JobView
    events: list[Event]
    log_dir: Path
    journal: Path
    postmortem: Path | None = None


# A service runs beside a job for as long as `supervise()` runs it (the attach server):
# entered before the job starts, left after its last event.  The supervisor calls it
# with the `Job`; it is how a layer above the supervisor plugs in without the
# supervisor importing it.
Service = Callable[["Job"], AbstractAsyncContextManager[object]]


@dataclass(frozen=True)
class _End:
    state: JobState
    exit_code: int
    reason: str
    culprit: str | None = None
    time_limit: bool = False
    extra: dict[str, Any] | None = None  # the results gate's facts (the point that failed it)

    @property
    def detail(self) -> dict[str, Any] | None:
        """The final job event's detail: the failure's culprit, or that time ran out."""
        detail: dict[str, Any] = dict(self.extra or {})
        if self.culprit:
            detail["culprit"] = self.culprit
        if self.time_limit:
            detail["time_limit"] = True
        return detail or None


@dataclass
class _Group:
    name: str
    members: list[UnitRunner] = field(default_factory=list)
    # the attempts a group restart is stopping: relaunches wait until they are gone
    stopping: list[tuple[UnitRunner, Handle]] = field(default_factory=list)
    due: float = 0.0  # clock time at which the group relaunches


def check_plan(plan: Plan) -> None:
    """What the supervisor itself relies on: unique names, known edges, valid regexes."""
    problems: list[str] = []
    names = [u.name for u in plan.units]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            problems.append(f"unit {name!r} appears twice")
        seen.add(name)
    for unit in plan.units:
        for edge in unit.after:
            if edge.unit not in seen:
                problems.append(f"unit {unit.name!r} depends on unknown unit {edge.unit!r}")
            elif edge.unit == unit.name:
                problems.append(f"unit {unit.name!r} depends on itself")
        patterns = list(unit.fatal_patterns)
        if unit.readiness is not None and isinstance(unit.readiness.probe, LogProbe):
            patterns.append(unit.readiness.probe.pattern)
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                problems.append(f"unit {unit.name!r}: bad pattern {pattern!r}: {e}")
    if problems:
        raise PlanError(problems)


def write_files(plan: Plan) -> None:
    """The configuration files the plan generated (`plan.files`), written before any launch."""
    for name, content in plan.files.items():
        path = Path(name)
        if not within(plan.log_dir, name):
            raise LaunchError(f"the generated file {path} is outside the log directory {plan.log_dir}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".srtd-tmp")
            tmp.write_text(content, encoding="utf-8")
            os.replace(tmp, path)
        except OSError as e:
            raise LaunchError(f"cannot write the generated file {path}: {e}") from e


class Job:
    def __init__(
        self,
        plan: Plan,
        launcher: Launcher,
        *,
        log_dir: Path | None = None,
        clock: Clock | None = None,
        http_transport: httpx.AsyncBaseTransport | None = None,
        stop: Stop | None = None,
        console: Console | None = None,
        log_watch: WatchMode | None = None,
    ) -> None:
        check_plan(plan)
        self.plan = plan
        self.launcher = launcher
        self.log_dir = Path(log_dir if log_dir is not None else plan.log_dir)
        self._clock: Clock = clock or SystemClock()
        self.stop = stop or Stop()
        self.console: Console = console if console is not None else TerminalConsole()
        self._transport = http_transport
        self.journal = Journal(None, [u.name for u in plan.units])
        self.runners: dict[str, UnitRunner] = {u.name: UnitRunner(self, u, self.log_dir / u.log) for u in plan.units}
        self.groups: dict[str, _Group] = {}
        for runner in self.runners.values():
            if runner.unit.group is not None:
                self.groups.setdefault(runner.unit.group, _Group(runner.unit.group)).members.append(runner)
        self.tailers: dict[Path, Tailer] = {}
        self.log_watch = self._log_watch(log_watch, launcher)
        self._watcher: LogWatcher | None = None
        self.failure: tuple[str, str] | None = None
        self.first_fatal: tuple[str, str] | None = None
        self._stopping = False
        self._http: httpx.AsyncClient
        self._changed = anyio.Event()
        self._listeners: list[Listener] = []
        self._tg: anyio.abc.TaskGroup | None = None
        self._started_at = 0.0

    @staticmethod
    def _log_watch(explicit: WatchMode | None, launcher: Launcher) -> WatchMode:
        """The caller's choice, else $SRTD_LOG_WATCH, else the launcher's `log_watch`
        (a launcher whose logs are written on other nodes says `poll`), else `auto`."""
        if explicit is not None:
            return explicit
        try:
            from_env = watch_mode(os.environ.get(WATCH_ENV))
        except ValueError as e:
            raise UsageError(f"${WATCH_ENV}: {e}") from e
        if os.environ.get(WATCH_ENV):
            return from_env
        return watch_mode(launcher.log_watch)

    # ---------------------------------------------------------------- the units' port (JobPort)

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def stop_requested(self) -> bool:
        return self.stop.requested.is_set()

    def emit(self, unit: str, state: UnitState, **fields: Any) -> Event:
        return self.journal.emit(unit, state, **fields)

    def unit_state(self, unit: str) -> UnitState:
        return self.journal.view.units[unit].state

    def peer(self, name: str) -> UnitRunner:
        return self.runners[name]

    async def changed(self) -> None:
        """Until the next state change or failure."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _on_event(self, event: Event) -> None:
        self._notify()
        self.console.event(event)

    def fail(self, unit: str, reason: str) -> None:
        if self.failure is None:
            self.failure = (unit, reason)
        self._notify()

    def record_fatal(self, unit: str, line: str) -> None:
        if self.first_fatal is None:
            self.first_fatal = (unit, line)

    def echo(self, unit: str, line: str) -> None:
        """A log line of a unit with `echo`, mirrored on the console."""
        self.console.output(unit, line)

    async def launch(self, unit: Unit, *, attempt: int, log_path: Path) -> Handle:
        if not within(str(self.log_dir), str(log_path)):  # the plan was checked; this is where it is written
            raise LaunchError(f"{unit.name}: log {log_path} is outside the log directory {self.log_dir}")
        return await self.launcher.start(unit, attempt=attempt, log_path=log_path)

    def address(self, node: str) -> str:
        return self.launcher.address(node)

    def tailer(self, path: Path) -> Tailer:
        tailer = self.tailers.get(path)
        if tailer is None:
            assert self._watcher is not None
            tailer = self.tailers[path] = Tailer(path)
            self._watcher.add(tailer)
        return tailer

    def rotate_log(self, path: Path, target: Path) -> None:
        tailer = self.tailers.get(path)
        if tailer is not None:
            tailer.rotate(target)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, target)

    def restart_group(self, origin: str, reason: str, delay: float) -> None:
        runner = self.runners[origin]
        group = self.groups[runner.unit.group or ""]
        group.stopping = [(m, m.handle) for m in group.members if m.live and m.handle is not None]
        group.due = self.clock.now() + delay
        why = f"restarted with group {group.name}: {origin} {reason}"
        for member in group.members:
            if member is not runner:
                member.interrupt(AttemptEnd("group", why, delay=delay))

    async def group_relaunch(self, unit: str) -> None:
        """Until the group's backoff is over and every attempt its restart stops has ended."""
        group = self.groups[self.runners[unit].unit.group or ""]
        await self.clock.sleep(group.due - self.clock.now())
        while any(m.handle is h and m.live for m, h in group.stopping):
            await self.changed()

    # ---------------------------------------------------------------- control verbs (srtd attach)

    def _runner(self, unit: str) -> UnitRunner:
        runner = self.runners.get(unit)
        if runner is None:
            raise ControlError(f"no unit {unit!r} in job {self.plan.job_id}")
        return runner

    def request_stop(self, reason: str) -> None:
        """The graceful, tiered teardown, as a stop signal would start it."""
        self.stop.request(reason=reason)

    def request_restart(self, unit: str) -> None:
        """End `unit`'s running attempt through its own restart path (counted as a restart)."""
        runner = self._runner(unit)
        if self._stopping or self.stop.requested.is_set():
            raise ControlError(f"job {self.plan.job_id} is stopping")
        if not runner.request_restart():
            raise ControlError(f"{unit} has no running attempt to restart (it is {runner.state.value})")

    def follow_log(self, unit: str, max_buffer: int) -> MemoryObjectReceiveStream[LogLine] | None:
        """The lines written to `unit`'s log from now on (through the file's tailer), or
        None when the job's tasks do not run (not started yet, or tearing down)."""
        runner = self._runner(unit)
        if self._tg is None or self._stopping:
            return None
        tailer = self.tailer(runner.log_path)
        with contextlib.suppress(OSError):
            tailer.poll()  # hand out what is written so far: the stream starts at the file's end
        return tailer.subscribe(max_buffer=max_buffer)

    async def signal_unit(self, unit: str, signum: int) -> None:
        """Send `signum` to `unit`'s running attempt (its process group, or its Slurm step)."""
        runner = self._runner(unit)
        if not runner.live or runner.handle is None:
            raise ControlError(f"{unit} has no running process (it is {runner.state.value})")
        await runner.handle.signal(signum)

    # ---------------------------------------------------------------- the job

    def listen(self, listener: Listener) -> None:
        """Call `listener` with every event of the job, right after it is journaled.

        For services (status reporting): call it before the job runs; the listener must
        neither block nor raise.
        """
        self._listeners.append(listener)

    async def run(self) -> JobResult:
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.journal = Journal(self.log_dir / JOURNAL_NAME, [u.name for u in self.plan.units])
        except OSError as e:
            raise LaunchError(f"cannot write the log directory {self.log_dir}: {e}") from e
        write_files(self.plan)
        self.journal.on_write_error = self._journal_unwritable
        self.journal.on_write_resumed = self._journal_writable
        self.journal.listen(self._on_event)
        self._results = ResultsWatch(self.plan, self.log_dir, self.journal, self.console, self.clock)
        for listener in self._listeners:
            self.journal.listen(listener)
        # Made before the job counts as starting: it imports httpcore.  verify=False: probes
        # speak plain http:// only (see _probes._url); the default TLS context would load the
        # CA bundle, 0.1-0.3 s more before the first unit could launch.
        client = httpx.AsyncClient(transport=self._transport, trust_env=False, verify=False)
        self._started_at = self.clock.now()
        self.journal.emit(
            None,
            JobState.STARTING,
            detail={
                "format": JOURNAL_FORMAT,
                "job": self.plan.name,
                "job_id": self.plan.job_id,
                "units": [u.name for u in self.plan.units],
                "nodes": {u.name: u.node for u in self.plan.units if u.nodes},
                "tiers": {u.name: u.tier for u in self.plan.units},
            },
        )
        end: _End | None = None
        try:
            async with self.launcher, client as http:
                self._http = http
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    tg.start_soon(self.journal.write_behind)  # the journal's file writes, off the event loop
                    self._watcher = open_watcher(self.log_watch)
                    tg.start_soon(self._watcher.run)
                    for runner in self.runners.values():
                        tg.start_soon(runner.run)
                    tg.start_soon(self._results.follow, self.changed)
                    if self.console.progress_interval:
                        tg.start_soon(self._progress, self.console.progress_interval)
                    end = await self._decide()
                    if end.state is JobState.FAILED:
                        self._print_culprit(end)  # at once, not after the teardown
                    self._stopping = True
                    self.journal.emit(None, JobState.STOPPING, reason=end.reason)
                    await teardown(list(self.runners.values()), self.stop)
                    if end.state is JobState.CANCELLED:
                        # The launcher explains the signal meanwhile (bounded); the end says it.
                        await self.stop.explanation()
                        end = self._stopped()
                    tg.cancel_scope.cancel()
        except BaseException as e:
            if self.journal.view.state not in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
                if isinstance(e, anyio.get_cancelled_exc_class()):
                    self.journal.emit(None, JobState.CANCELLED, exit_code=EXIT_JOB_FAILED, reason="cancelled")
                else:
                    reason = f"{type(e).__name__}: {e}"
                    self.journal.emit(None, JobState.FAILED, exit_code=EXIT_JOB_FAILED, reason=reason)
            self._close()
            raise
        assert end is not None
        self.journal.emit(
            None,
            end.state,
            exit_code=end.exit_code,
            reason=end.reason,
            detail=end.detail,
        )
        result = self._report(end)
        self._close()
        return result

    def _close(self) -> None:
        for tailer in self.tailers.values():
            tailer.close()
        if self._watcher is not None:
            self._watcher.close()
        self.journal.close()
        self.console.close()

    async def _decide(self) -> _End:
        runners = list(self.runners.values())
        terminals = [r for r in runners if r.unit.terminal]
        announced_running = False
        while True:
            if self.stop.requested.is_set():
                return self._stopped()
            if self.failure is not None:
                unit, reason = self.failure
                return _End(JobState.FAILED, EXIT_JOB_FAILED, f"{unit} failed: {reason}", unit)
            if terminals:
                if all(r.final for r in terminals):
                    gate = await self._results.finish([r.unit for r in terminals])
                    worst = max(terminals, key=lambda r: r.exit_for_job or 0)
                    code = worst.exit_for_job or 0
                    if code == EXIT_OK and gate is not None:
                        return _End(JobState.FAILED, EXIT_NO_RESULTS, gate.reason, gate.unit, extra=gate.detail)
                    if code == EXIT_OK:
                        return _End(JobState.SUCCEEDED, EXIT_OK, "every terminal unit exited 0")
                    reason = f"terminal unit {worst.name} {worst.failure or f'exited with code {code}'}"
                    return _End(JobState.FAILED, code, reason, worst.name)
            elif not self.plan.hold and all(r.final for r in runners):
                return _End(JobState.SUCCEEDED, EXIT_OK, "every unit has ended")
            if not announced_running and self._settled(runners):
                announced_running = True
                self.journal.emit(None, JobState.RUNNING)
            await wait_any(self._changed, self.stop.requested)

    def _stopped(self) -> _End:
        reason = self.stop.reason or "stop requested"
        return _End(JobState.CANCELLED, self.stop.exit_code, reason, time_limit=self.stop.time_limit)

    @staticmethod
    def _settled(runners: Sequence[UnitRunner]) -> bool:
        """Every non-terminal unit ready (or ended harmlessly) and every terminal one launched."""
        for r in runners:
            if r.unit.terminal:
                if not (r.launched or r.final):
                    return False
            elif r.state is not UnitState.READY and not (
                r.final and not (r.state is UnitState.FAILED and r.unit.critical)
            ):
                return False
        return True

    # ---------------------------------------------------------------- reporting

    async def _progress(self, interval: float) -> None:
        while self.journal.view.state is JobState.STARTING:
            await anyio.sleep(interval)
            if self.journal.view.state is not JobState.STARTING:
                return
            self.console.progress(self.progress_rows())

    def progress_rows(self) -> list[ProgressRow]:
        rows: list[ProgressRow] = []
        now = self.clock.now()
        for r in self.runners.values():
            state = r.state
            if state is UnitState.READY or r.final:
                continue
            waiting = ""
            if state is UnitState.WAITING:
                waiting = "after " + ", ".join(f"{e.unit} ({e.condition.value})" for e in r.waiting_on)
            elif state is UnitState.STARTING and r.unit.readiness is not None:
                probe = r.unit.readiness.probe
                host = None if isinstance(probe, LogProbe) else self.launcher.address(probe.node)
                waiting = "probe " + describe(probe, host)
                if r.last_probe:
                    waiting += f": {r.last_probe}"
            elif state is UnitState.BACKOFF:
                waiting = "restart backoff"
            took = now - r.launched_at if r.launched_at is not None and state is UnitState.STARTING else None
            rows.append(ProgressRow(r.name, state.value, waiting, took))
        return rows

    def summary_rows(self) -> list[SummaryRow]:
        rows = []
        for r in self.runners.values():
            view = self.journal.view.units[r.name]
            status = (
                ExitStatus(view.exit_code, view.signal).describe()
                if view.exit_code is not None or view.signal is not None
                else "-"
            )
            rows.append(
                SummaryRow(
                    unit=r.name,
                    node=r.unit.node if r.unit.nodes else "-",
                    state=view.state.value,
                    restarts=r.restarts.count,
                    exit=status,
                    ready_after=r.ready_seconds,
                )
            )
        return rows

    def _print_culprit(self, end: _End) -> None:
        culprit = self._root(end.culprit)
        fatal = self.first_fatal[1] if self.first_fatal and culprit == self.first_fatal[0] else None
        log = self.runners[culprit].log_path if culprit in self.runners else None
        view = self.journal.view
        self.console.failure(culprit_block(reason=end.reason, culprit=culprit, view=view, fatal_line=fatal, log=log))

    def _journal_unwritable(self, why: str) -> None:
        # said once; the job goes on deciding, the events stay in memory until the file takes them
        self.console.failure(f"srtd: cannot write {why}; the journal is kept in memory until it can be written")

    def _journal_writable(self, caught_up: int) -> None:
        self.console.failure(f"srtd: {JOURNAL_NAME} is written again ({caught_up} events caught up)")

    def _root(self, culprit: str | None) -> str | None:
        """A unit that never started because a dependency failed points at that dependency."""
        runner = self.runners.get(culprit) if culprit else None
        return runner.root_cause or culprit if runner is not None else culprit

    def _report(self, end: _End) -> JobResult:
        view = self.journal.view
        journal_path = self.log_dir / JOURNAL_NAME
        rows = self.summary_rows()
        postmortem: Path | None = None
        if end.state is JobState.FAILED:
            culprit = self._root(end.culprit)
            failed = [r for r in self.runners.values() if r.state is UnitState.FAILED or r.name == culprit]
            try:
                postmortem = write_postmortem(
                    self.log_dir / POSTMORTEM_NAME,
                    job=f"{self.plan.name} (job {self.plan.job_id})",
                    exit_code=end.exit_code,
                    reason=end.reason,
                    culprit=culprit,
                    first_fatal=self.first_fatal,
                    view=view,
                    rows=rows,
                    logs=[UnitLog(r.name, r.log_path) for r in failed],
                    events=self.journal.events,
                )
            except OSError:
                postmortem = None
        self.console.summary(rows, f"{self.plan.name}: {end.state.value}, exit code {end.exit_code}")
        return JobResult(
            exit_code=end.exit_code,
            state=end.state,
            reason=end.reason,
            culprit=end.culprit,
            view=view.model_copy(deep=True),
            events=list(self.journal.events),
            log_dir=self.log_dir,
            journal=journal_path,
            postmortem=postmortem,
        )


async def supervise(
    plan: Plan,
    launcher: Launcher,
    *,
    log_dir: Path | str | None = None,
    clock: Clock | None = None,
    http_transport: httpx.AsyncBaseTransport | None = None,
    stop: Stop | None = None,
    console: Console | None = None,
    services: Sequence[Service] = (),
    log_watch: WatchMode | None = None,
) -> JobResult:
    """Run `plan` to its end with `launcher` (entered here) and return how it ended.

    `log_dir` defaults to `plan.log_dir`; relative unit logs are placed under it.
    `stop` lets the caller end the job (`Stop.request`, `Stop.kill`); `run()` feeds
    signals into it.  `console=None` prints to stderr; pass `NullConsole()` for silence.
    Each of `services` is entered (with the `Job`) before the job starts and left after
    its final event.  `log_watch` (`auto`, `inotify`, `poll`) overrides $SRTD_LOG_WATCH
    and the launcher's `log_watch` (see `_watch.py`).
    Raises `PlanError` if the plan is inconsistent (nothing started) and `LaunchError`
    if the launcher or the log directory cannot be set up.
    """
    job = Job(
        plan,
        launcher,
        log_dir=Path(log_dir) if log_dir is not None else None,
        clock=clock,
        http_transport=http_transport,
        stop=stop,
        console=console,
        log_watch=log_watch,
    )
    async with contextlib.AsyncExitStack() as stack:
        for service in services:
            await stack.enter_async_context(service(job))
        return await job.run()


__all__ = ["JobResult", "NullConsole", "Service", "Stop", "supervise"]
