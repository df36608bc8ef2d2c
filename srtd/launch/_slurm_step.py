"""`SlurmHandle`: one attempt of a unit under `SlurmLauncher`, its srun client and its step.

How it learns the step id, signals the step, runs srun again while slurmctld does not
answer and sends a stop again once a late task begins: `srtd.launch._slurm`'s docstring.
"""

from __future__ import annotations

import contextlib
import os
import signal as _signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from srtd._files import OUTPUT_LIMIT, SMALL_LIMIT, read_back
from srtd._structlog import get_logger
from srtd.errors import EXIT_SIGNAL_BASE, FileRefused, LaunchError
from srtd.launch._controller import backoff, list_steps, srun_never_reached
from srtd.launch._process import ChildProcess
from srtd.launch._protocol import ExitStatus
from srtd.launch._srun import STEP_DIR, step_file
from srtd.unit import Unit

if TYPE_CHECKING:
    from srtd.launch._slurm import SlurmLauncher

log = get_logger("srtd.launch")

STEP_ID_WAIT = 20.0  # seconds start() waits for the wrapper to record its step id
_POLL = 0.02
_MESSAGE_LINES = 8
_STOPPING = (_signal.SIGTERM, _signal.SIGKILL, _signal.SIGINT)

Spawn = Callable[[], "subprocess.Popen[bytes]"]  # runs the attempt's srun (again)


def _status(returncode: int) -> ExitStatus:
    # srun reports a task killed by signal N as 128 + N.
    if EXIT_SIGNAL_BASE < returncode <= EXIT_SIGNAL_BASE + 64:
        return ExitStatus(signal=returncode - EXIT_SIGNAL_BASE)
    return ExitStatus.from_returncode(returncode)


def _tail(path: Path, lines: int = _MESSAGE_LINES) -> str:
    try:
        text = read_back(path, limit=OUTPUT_LIMIT, error=FileRefused).decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


class SlurmHandle:
    """One attempt: an srun client and the step it created."""

    def __init__(self, launcher: SlurmLauncher, unit: Unit, step: str, spawn: Spawn) -> None:
        self.launcher = launcher
        self.unit = unit
        self.step = step  # the step's name
        self.record = step_file(launcher.log_dir, step) if unit.srun.shell else None
        self.messages = launcher.log_dir / STEP_DIR / f"{step}.srun"
        self._spawn = spawn
        self._spawned = launcher.controller.now()
        self._child = ChildProcess(spawn())
        self._step_id: str | None = None
        self._settled = False
        self._lock = anyio.Lock()
        self._relaunch = anyio.Lock()
        self._retries = backoff()
        self._unreached_since: float | None = None
        self._stopped = False  # signalled: an srun that never reached the controller is not run again
        self._resend: int | None = None  # a stop signal sent before the task began: sent again once it has
        self.lost: str | None = None  # set when its node is lost: why
        self.lost_node: str | None = None  # and which node

    @property
    def pid(self) -> int | None:
        return self._child.pid

    @property
    def step_id(self) -> str | None:
        """`<job>.<step>` once known."""
        if self._step_id is None:
            self._step_id = self._recorded()
        return self._step_id

    def _recorded(self) -> str | None:
        """The id the step's task recorded as it began, if it has."""
        if self.record is None:
            return None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = read_back(self.record, limit=SMALL_LIMIT, error=FileRefused).decode("utf-8").strip()
            if text and "." in text:
                return text
        return None

    def poll(self) -> ExitStatus | None:
        status = self._child.poll()
        if status is not None and self.lost is not None:
            return ExitStatus.unreachable(self.lost, self.lost_node)
        return None if status is None else _status_of(status)

    def ended(self) -> bool:
        """Its srun client has exited (for good or before a run again)."""
        return self._child.poll() is not None

    def give_up(self, reason: str, node: str | None = None) -> None:
        """Its node is lost: the attempt ends now with `reason`, and is never signalled again."""
        self.lost = reason
        self.lost_node = node
        self.kill_client()

    async def wait(self) -> ExitStatus:
        status = await self._child.wait()
        while await self._retry(status):
            status = await self._child.wait()
        if self.lost is not None:
            return ExitStatus.unreachable(self.lost, self.lost_node)
        if status.signal is not None and not self._settled:
            # The srun client itself was killed: its step (and task) may live on.
            async with self._lock:
                if not self._settled:
                    await self.launcher.end_orphan(self)
                    self._settled = True
        return _status_of(status)

    async def settle(self) -> None:
        """Until the wrapper recorded its step id, srun exited, or `step_id_wait` passed.

        srun may wait a long time for Slurm to create the step (busy nodes); a teardown
        cancels this wait, and `signal` finds the step by name or signals srun itself.
        """
        if self.record is None:
            return  # shell-less: no wrapper writes an id; squeue finds the step by name
        with anyio.move_on_after(self.launcher.step_id_wait) as scope:
            while self.step_id is None:
                status = self.poll()
                if status is not None:
                    if await self._retry(status):
                        scope.deadline = anyio.current_time() + self.launcher.step_id_wait
                        continue
                    if self.step_id is None and status.failed:
                        said = _tail(self.messages) or "(srun printed nothing)"
                        why = f"srun refused step {self.step} ({status.describe()})"
                        raise LaunchError(f"{self.unit.name}: {why}: {said}")
                    return
                await anyio.sleep(_POLL)
        if self._unreached_since is not None and self.step_id is not None:
            self.launcher.controller.answered()

    async def _retry(self, status: ExitStatus) -> bool:
        """srun failed because slurmctld did not answer, before any task ran: run it again
        after a backoff (True), while the attempt is not being stopped and patience lasts."""
        async with self._relaunch:
            if self._child.poll() is None:
                return True  # another task ran it again meanwhile
            said = srun_never_reached(_tail(self.messages)) if status.failed and self.step_id is None else None
            controller = self.launcher.controller
            if said is None or self._stopped or self.lost is not None:
                return False
            controller.silent(said, since=self._spawned)
            if self._unreached_since is None:
                self._unreached_since = self._spawned
            if controller.gave_up(self._unreached_since):
                return False
            await anyio.sleep(next(self._retries))
            if self._stopped:
                return False
            log.info("running srun again: slurmctld did not answer", step=self.step)
            try:
                self._spawned = controller.now()
                self._child = ChildProcess(self._spawn())
            except OSError:
                return False  # the failed run's status stands
            return True

    async def find_step(self) -> str | None:
        """The step id from the wrapper's record, else from squeue by the step's (unique) name."""
        if self.step_id is not None:
            return self._step_id
        # One squeue, not retried: a stop must not wait for a silent controller (the srun
        # client takes the signal instead).
        steps = await list_steps(self.launcher.job_id, self.launcher.squeue)
        for sid, name in (steps or {}).items():
            if name == self.step:
                self._step_id = sid
        return self._step_id

    async def signal(self, sig: int) -> None:
        self._stopped = self._stopped or sig in _STOPPING
        if self._child.poll() is not None or self.lost is not None:
            return
        if sig in _STOPPING:
            self.launcher.hurry(self.unit.nodes)  # a lost node must not hold the stop for `node_lost_after`
            if self.record is not None and self._recorded() is None:
                self._resend_when_running(sig)
        step = await self.find_step()
        if step is None:
            # Not started yet (or not findable): srun forwards the signal to its tasks.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._child.pid, sig)
            return
        self.launcher.send(step, sig, self)

    def _resend_when_running(self, sig: int) -> None:
        """Send `sig` again once the task records itself (`srtd.launch._slurm`'s docstring; measured
        on Slurm 22.05 with a task held back by srun's --prolog)."""
        pending = self._resend is not None
        self._resend = sig  # the latest stop is the one sent
        if not pending:
            self.launcher.in_background(self._resend_once_running)

    async def _resend_once_running(self) -> None:
        while self._child.poll() is None and self.lost is None:
            step = self._recorded()
            if step is not None:
                assert self._resend is not None
                log.info("the step's task began after its stop signal; sending it again", step=self.step)
                self.launcher.send(step, self._resend, self)
                return
            await anyio.sleep(_POLL)

    async def kill(self) -> None:
        await self.signal(_signal.SIGKILL)

    def kill_client(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self._child.pid, _signal.SIGKILL)


def _status_of(status: ExitStatus) -> ExitStatus:
    return _status(status.code) if status.code is not None else status
