"""The job: its state, every unit's task, and the decision when to end.

Around it: the teardown (`_teardown.py`), the end (`_end.py`) and the report made of it (`_outcome.py`),
what the console shows (`_rows.py`), the control verbs its services use (`_control.py`)
and the restarts of multi-node groups (`_groups.py`).

`supervise()` runs one `Plan` to its end and returns a `JobResult`.  The job ends
- when every terminal unit has ended: the worst exit code wins (a terminal unit
  killed by signal N counts as 128 + N, `EXIT_SIGNAL_BASE`);
- on a critical failure: exit 1, the culprit, its exit or matched line and log tail;
- on a stop request (a signal): exit 128 + signum, state `cancelled`;
- without terminal units and without `plan.hold`: when every unit has ended (exit 0:
  non-critical failures are recorded, not fatal);
- with `plan.hold` (and no terminal units): only by a stop request or a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import anyio
import anyio.abc

from srtd._files import check_under, within, write_under
from srtd.errors import EXIT_JOB_FAILED, EXIT_NO_RESULTS, EXIT_OK, FileRefused, LaunchError, PlanError
from srtd.events import JOURNAL_FORMAT, Event, EventFacts, JobState, UnitState
from srtd.launch import Handle, Launcher
from srtd.patterns import log_pattern_error
from srtd.supervisor._after import AfterJobHook, run_after_job
from srtd.supervisor._clock import Clock, SystemClock, wait_any
from srtd.supervisor._console import Console, NullConsole, TerminalConsole
from srtd.supervisor._control import JobControl
from srtd.supervisor._diskspace import Level, LogSpaceWatch
from srtd.supervisor._end import POSTMORTEM_NAME, End, JobResult
from srtd.supervisor._groups import Groups
from srtd.supervisor._journal import JOURNAL_NAME, Journal, Listener
from srtd.supervisor._port import ServicePort
from srtd.supervisor._preflight import Preflight, checked_nodes
from srtd.supervisor._probes import http_client, speaks_http
from srtd.supervisor._replacing import ReplacingPort
from srtd.supervisor._results import ResultsWatch
from srtd.supervisor._rows import (
    culprit_text,
    journal_unwritable,
    journal_writable,
    keep_drawn,
    progress_rows,
    show_progress,
)
from srtd.supervisor._tail import Tailer
from srtd.supervisor._teardown import Stop, journal_stray, teardown
from srtd.supervisor._unit import UnitRunner
from srtd.supervisor._watch import LogWatcher, WatchMode, choose_watch_mode, open_watcher
from srtd.unit import LogProbe, Plan, Unit

if TYPE_CHECKING:
    import httpx

# A service runs beside a job for as long as `supervise()` runs it (the attach server,
# status reporting): entered before the job starts, left after its last event.  The
# supervisor calls it with the job's `ServicePort`; it is how a layer above the
# supervisor plugs in without the supervisor importing it.
Service = Callable[[ServicePort], AbstractAsyncContextManager[object]]


def check_plan(plan: Plan) -> None:
    """What the supervisor itself relies on: unique names, known edges, valid regexes."""
    problems: list[str] = []
    names = [u.name for u in plan.units]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            problems.append(f"unit {name!r} appears twice")
        seen.add(name)
    at_teardown = {u.name for u in plan.units if u.on_teardown}
    for unit in plan.units:
        if unit.on_teardown and unit.after:
            problems.append(f"unit {unit.name!r} runs at teardown and cannot wait for other units")
        for edge in unit.after:
            if edge.unit in at_teardown and not unit.on_teardown:
                problems.append(f"unit {unit.name!r} depends on {edge.unit!r}, which runs only at teardown")
            if edge.unit not in seen:
                problems.append(f"unit {unit.name!r} depends on unknown unit {edge.unit!r}")
            elif edge.unit == unit.name:
                problems.append(f"unit {unit.name!r} depends on itself")
        patterns = list(unit.fatal_patterns)
        for gate in (unit.readiness, unit.liveness):
            if gate is not None and isinstance(gate.probe, LogProbe):
                patterns.append(gate.probe.pattern)
        for pattern in patterns:
            if (why := log_pattern_error(pattern)) is not None:
                problems.append(f"unit {unit.name!r}: bad pattern {pattern!r}: {why}")
    if problems:
        raise PlanError(problems)


def write_files(plan: Plan) -> None:
    """The configuration files the plan generated (`plan.files`), written before any launch."""
    for name, content in plan.files.items():
        path = Path(name)
        if not within(plan.log_dir, name):
            raise LaunchError(f"the generated file {path} is outside the log directory {plan.log_dir}")
        try:
            write_under(Path(plan.log_dir), path, content, error=FileRefused)
        except FileRefused:  # it names the file and why
            raise
        except OSError as e:
            raise LaunchError(f"cannot write the generated file {path}: {e}") from e


class Job(ReplacingPort):
    """One job's state and its end decision; the units see it through `JobPort`, its
    services through `ServicePort` (`control`)."""

    def __init__(
        self,
        plan: Plan,
        launcher: Launcher,
        *,
        log_dir: Path | str | None = None,
        clock: Clock | None = None,
        http_transport: httpx.AsyncBaseTransport | None = None,
        stop: Stop | None = None,
        console: Console | None = None,
        log_watch: WatchMode | None = None,
        after_job: Sequence[AfterJobHook] = (),
        preflight: Preflight | None = None,
    ) -> None:
        check_plan(plan)
        self.preflight = preflight  # None: no node checks (srtd run passes the cluster's)
        self.after_job = tuple(after_job)  # the result publishers (srtd.reporting), see _after.py
        self.plan = plan
        self.launcher = launcher
        self.log_dir = Path(log_dir if log_dir is not None else plan.log_dir)
        self._clock: Clock = clock or SystemClock()
        self.stop = stop or Stop()
        self.console: Console = console if console is not None else TerminalConsole()
        self._transport = http_transport
        self.journal = Journal(None, [u.name for u in plan.units])
        self.runners: dict[str, UnitRunner] = {u.name: UnitRunner(self, u, self.log_dir / u.log) for u in plan.units}
        self.groups = Groups(self.runners.values(), self._clock)
        self.tailers: dict[Path, Tailer] = {}
        self.log_watch = choose_watch_mode(log_watch, launcher.log_watch)
        self._watcher: LogWatcher | None = None
        self._log_space: LogSpaceWatch | None = None
        self.failure: tuple[str, str] | None = None
        self.first_fatal: tuple[str, str] | None = None
        self._stopping = False
        self._http: httpx.AsyncClient | None = None
        self._changed = anyio.Event()
        self.listeners: list[Listener] = []  # the services' (`ServicePort.listen`)
        self._tg: anyio.abc.TaskGroup | None = None
        self.control = JobControl(self)

    # ---------------------------------------------------------------- the units' port (JobPort)

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:  # a plan with no HTTP probe: only a service could ask
            self._http = http_client(self._transport)
        return self._http

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def stop_requested(self) -> bool:
        return self.stop.requested.is_set()

    @property
    def tasks_running(self) -> bool:
        """The job's tasks run (it has started, and its task group is open)."""
        return self._tg is not None

    @property
    def log_space_full(self) -> bool:
        return self._log_space is not None and self._log_space.level is Level.FULL

    def emit(self, unit: str, state: UnitState, **facts: Unpack[EventFacts]) -> Event:
        return self.journal.emit(unit, state, **facts)

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
        try:  # its directories made through no link, no link or FIFO at its name; the launcher opens it
            check_under(self.log_dir, log_path, error=FileRefused)
        except FileRefused:  # it names the file and why
            raise
        except OSError as e:
            raise LaunchError(f"{unit.name}: cannot create its log {log_path}: {e.strerror}") from e
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
        self.groups.restart(self.runners[origin], reason, delay)

    async def group_relaunch(self, unit: str) -> None:
        await self.groups.relaunch(self.runners[unit], self.changed)

    # ---------------------------------------------------------------- the job

    async def run(self) -> JobResult:
        self._open()
        if self._transport is not None or speaks_http(self.plan):
            _ = self.http  # made before the job counts as starting: it imports httpx
        self.journal.emit(None, JobState.STARTING, detail=_starting_detail(self.plan))
        try:
            async with self.launcher:
                try:
                    end = await checked_nodes(self, self.preflight) or await self._supervise()
                finally:
                    if self._http is not None:
                        with anyio.CancelScope(shield=True):
                            await self._http.aclose()
                end = await run_after_job(self.after_job, self.plan, self.log_dir, self.journal, end)
        except BaseException as e:
            _abandoned(self.journal, e)
            self._close()
            raise
        result = await _ended(self, end)
        self._close()
        return result

    def _open(self) -> None:
        """The log directory, the journal in it, the generated files, the listeners."""
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.journal = Journal(self.log_dir / JOURNAL_NAME, [u.name for u in self.plan.units])
        except OSError as e:
            raise LaunchError(f"cannot write the log directory {self.log_dir}: {e}") from e
        write_files(self.plan)
        self.journal.on_write_error = lambda why: self.console.failure(journal_unwritable(why))
        self.journal.on_write_resumed = lambda n: self.console.failure(journal_writable(JOURNAL_NAME, n))
        self.journal.listen(self._on_event)
        self._results = ResultsWatch(self.plan, self.log_dir, self.journal, self.console, self.clock)
        for listener in self.listeners:
            self.journal.listen(listener)

    async def _supervise(self) -> End:
        """Every unit's task until the end decision, then the teardown; how the job ends."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self.journal.write_behind)  # the journal's file writes, off the event loop
            self._watcher = open_watcher(self.log_watch)
            tg.start_soon(self._watcher.run)
            for runner in self.runners.values():
                if not runner.unit.on_teardown:  # host teardown steps: launched by the teardown
                    runner.start(tg)
            tg.start_soon(self._results.follow, self.changed)
            self._log_space = LogSpaceWatch(self.log_dir, self.journal)
            tg.start_soon(self._log_space.run)  # the units' own logs fill it unseen
            tg.start_soon(keep_drawn, self.console, self.changed)
            if self.console.progress_interval:
                rows = lambda: progress_rows(self.runners.values(), self.clock.now(), self.launcher.address)  # noqa: E731
                tg.start_soon(show_progress, self.journal, self.console, self.console.progress_interval, rows)
            end = await self._decide()
            if end.state is JobState.FAILED:  # at once, not after the teardown
                view, first_fatal = self.journal.view, self.first_fatal
                text = culprit_text(self.runners, view, reason=end.reason, culprit=end.culprit, first_fatal=first_fatal)
                self.console.failure(text)
            self._stopping = True
            self.journal.emit(None, JobState.STOPPING, reason=end.reason)
            # What the units left outside their groups: journaled, ended (at once after a
            # second Ctrl-C, as the units are) and reaped by the launcher.
            end_strays = partial(self.launcher.end_strays, partial(journal_stray, self.journal), self.stop.killed)
            await teardown(list(self.runners.values()), self.stop, end_strays)
            if end.state is JobState.CANCELLED:
                # The launcher explains the signal meanwhile (bounded); the end says it.
                await self.stop.explanation()
                end = self.stopped()
            tg.cancel_scope.cancel()
        return end

    def _close(self) -> None:
        for tailer in self.tailers.values():
            tailer.close()
        if self._watcher is not None:
            self._watcher.close()
        self.journal.close()
        self.console.close()

    async def _decide(self) -> End:
        runners = [r for r in self.runners.values() if not r.unit.on_teardown]
        terminals = [r for r in runners if r.unit.terminal]
        announced_running = False
        while True:
            if self.stop.requested.is_set():
                return self.stopped()
            if self.failure is not None:
                unit, reason = self.failure
                return End(JobState.FAILED, EXIT_JOB_FAILED, f"{unit} failed: {reason}", unit)
            if terminals:
                if all(r.final for r in terminals):
                    return await _terminals_ended(self._results, terminals)
            elif not self.plan.hold and all(r.final for r in runners):
                return End(JobState.SUCCEEDED, EXIT_OK, "every unit has ended")
            if not announced_running and _settled(runners):
                announced_running = True
                self.journal.emit(None, JobState.RUNNING)
            await wait_any(self._changed, self.stop.requested)

    def stopped(self) -> End:
        reason = self.stop.reason or "stop requested"
        return End(JobState.CANCELLED, self.stop.exit_code, reason, time_limit=self.stop.time_limit)


async def _ended(job: Job, end: End) -> JobResult:
    """The job's final event, and the report of its end (loaded as the job ends: srtd/supervisor/_outcome.py)."""
    from srtd.supervisor._outcome import final_detail, report

    detail = await final_detail(job, end)  # a failure's post-mortem too
    job.journal.emit(None, end.state, exit_code=end.exit_code, reason=end.reason, detail=detail)
    return report(job, end)


async def _terminals_ended(results: ResultsWatch, terminals: Sequence[UnitRunner]) -> End:
    """Every terminal unit has ended: the worst code wins, and the results gate has its say."""
    gate = await results.finish([r.unit for r in terminals])
    worst = max(terminals, key=lambda r: r.exit_for_job or 0)
    code = worst.exit_for_job or 0
    if code == EXIT_OK and gate is not None:
        return End(JobState.FAILED, EXIT_NO_RESULTS, gate.reason, gate.unit, extra=gate.detail)
    if code == EXIT_OK:
        return End(JobState.SUCCEEDED, EXIT_OK, "every terminal unit exited 0")
    reason = f"terminal unit {worst.name} {worst.failure or f'exited with code {code}'}"
    return End(JobState.FAILED, code, reason, worst.name)


def _starting_detail(plan: Plan) -> dict[str, Any]:
    """The first event's detail: what a reader of the journal needs before any unit's event."""
    return {
        "format": JOURNAL_FORMAT,
        "job": plan.name,
        "job_id": plan.job_id,
        "units": [u.name for u in plan.units],
        "nodes": {u.name: u.node for u in plan.units if u.nodes},
        "tiers": {u.name: u.tier for u in plan.units},
    }


def _abandoned(journal: Journal, error: BaseException) -> None:
    """The job did not reach its end decision (cancelled, or a bug): the journal says so."""
    if journal.view.state not in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
        if isinstance(error, anyio.get_cancelled_exc_class()):
            journal.emit(None, JobState.CANCELLED, exit_code=EXIT_JOB_FAILED, reason="cancelled")
        else:
            reason = f"{type(error).__name__}: {error}"
            journal.emit(None, JobState.FAILED, exit_code=EXIT_JOB_FAILED, reason=reason)


def _settled(runners: Sequence[UnitRunner]) -> bool:
    """Every non-terminal unit ready (or ended harmlessly) and every terminal one launched."""
    for r in runners:
        if r.unit.on_teardown:
            continue
        if r.unit.terminal:
            if not (r.launched or r.final):
                return False
        elif r.state is not UnitState.READY and not (r.final and not (r.state is UnitState.FAILED and r.unit.critical)):
            return False
    return True


class JobOptions(TypedDict, total=False):
    """What `supervise()` and `run()` take beyond the plan and the launcher."""

    log_dir: Path | str | None
    clock: Clock | None
    http_transport: httpx.AsyncBaseTransport | None
    console: Console | None
    log_watch: WatchMode | None
    after_job: Sequence[AfterJobHook]
    preflight: Preflight | None


async def supervise(
    plan: Plan,
    launcher: Launcher,
    *,
    stop: Stop | None = None,
    services: Sequence[Service] = (),
    **options: Unpack[JobOptions],
) -> JobResult:
    """Run `plan` to its end with `launcher` (entered here) and return how it ended.

    `log_dir` defaults to `plan.log_dir`; relative unit logs are placed under it.
    `stop` lets the caller end the job (`Stop.request`, `Stop.kill`); `run()` feeds
    signals into it.  `console=None` prints to stderr; pass `NullConsole()` for silence.
    Each of `services` is entered (with the job's `ServicePort`) before the job starts and
    left after its final event.  `after_job` hooks run after the teardown of a job that
    succeeded (`_after.py`: the result publishers).  `log_watch` (`auto`, `inotify`, `poll`) overrides $SRTD_LOG_WATCH
    and the launcher's `log_watch` (see `_watch.py`).
    Raises `PlanError` if the plan is inconsistent (nothing started) and `LaunchError`
    if the launcher or the log directory cannot be set up.
    """
    job = Job(plan, launcher, stop=stop, **options)
    async with contextlib.AsyncExitStack() as stack:
        for service in services:
            await stack.enter_async_context(service(job.control))
        return await job.run()


__all__ = [
    "JOURNAL_NAME",
    "POSTMORTEM_NAME",
    "Job",
    "JobOptions",
    "JobResult",
    "NullConsole",
    "Service",
    "Stop",
    "supervise",
]
