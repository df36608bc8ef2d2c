"""The control verbs of a running job (`srtd attach`'s stop, restart, signal, tail), and
what a service may read of it: the `ServicePort` the supervisor hands its services."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from anyio.streams.memory import MemoryObjectReceiveStream

from srtd.errors import ControlError
from srtd.supervisor._journal import Journal, Listener
from srtd.supervisor._tail import LogLine
from srtd.unit import Plan

if TYPE_CHECKING:
    from srtd.supervisor._job import Job
    from srtd.supervisor._unit import UnitRunner


class JobControl:
    """A `ServicePort` onto one `Job`: the job's services see it through this, never the job."""

    def __init__(self, job: Job) -> None:
        self._job = job

    @property
    def plan(self) -> Plan:
        return self._job.plan

    @property
    def log_dir(self) -> Path:
        return self._job.log_dir

    @property
    def journal(self) -> Journal:
        """The job's journal (the job creates a new one as it starts)."""
        return self._job.journal

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(self._job.runners)

    def log_path(self, unit: str) -> Path:
        return self._runner(unit).log_path

    def listen(self, listener: Listener) -> None:
        """Call `listener` with every event of the job, right after it is journaled.

        For services (status reporting): call it before the job runs; the listener must
        neither block nor raise.
        """
        self._job.listeners.append(listener)

    def _runner(self, unit: str) -> UnitRunner:
        runner = self._job.runners.get(unit)
        if runner is None:
            raise ControlError(f"no unit {unit!r} in job {self._job.plan.job_id}")
        return runner

    def request_stop(self, reason: str) -> None:
        """The graceful, tiered teardown, as a stop signal would start it."""
        self._job.stop.request(reason=reason)

    def request_restart(self, unit: str) -> None:
        """End `unit`'s running attempt through its own restart path (counted as a restart)."""
        runner = self._runner(unit)
        if self._job.stopping or self._job.stop_requested:
            raise ControlError(f"job {self._job.plan.job_id} is stopping")
        if not runner.request_restart():
            raise ControlError(f"{unit} has no running attempt to restart (it is {runner.state.value})")

    def follow_log(self, unit: str, max_buffer: int) -> MemoryObjectReceiveStream[LogLine] | None:
        """The lines written to `unit`'s log from now on (through the file's tailer), or
        None when the job's tasks do not run (not started yet, or tearing down)."""
        runner = self._runner(unit)
        if not self._job.tasks_running or self._job.stopping:
            return None
        tailer = self._job.tailer(runner.log_path)
        with contextlib.suppress(OSError):
            tailer.poll()  # hand out what is written so far: the stream starts at the file's end
        return tailer.subscribe(max_buffer=max_buffer)

    async def signal_unit(self, unit: str, signum: int) -> None:
        """Send `signum` to `unit`'s running attempt (its process group, or its Slurm step)."""
        runner = self._runner(unit)
        if not runner.live or runner.handle is None:
            raise ControlError(f"{unit} has no running process (it is {runner.state.value})")
        # Noted before it is sent: the exit it may cause can be seen before `signal` returns,
        # and its journaled reason must say that a person sent it (`_unit_after`).
        earlier, runner.user_signal = runner.user_signal, (signum, self._job.clock.now())
        try:
            await runner.handle.signal(signum)
        except BaseException:
            runner.user_signal = earlier
            raise
