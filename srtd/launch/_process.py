"""Awaiting a child's exit without threads and without a polling tick.

Linux gives every process a pollable file descriptor (`pidfd_open`, kernel 5.3+):
it becomes readable the moment the process exits.  `ChildProcess` awaits that
descriptor on the event loop, so an exit is seen when it happens.  Where pidfd is not
available it falls back to a 50 ms `poll()` loop.

Because the pidfd turns readable while the child is still an unreaped zombie, the
caller gets a hook (`before_reap`) that runs at a moment when the pid, and therefore
the process group id, cannot have been reused: that is where the local launcher kills
whatever the unit left behind in its process group.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import anyio
from anyio.lowlevel import cancel_shielded_checkpoint, checkpoint_if_cancelled

from srtd.launch._protocol import ExitStatus

_FALLBACK_POLL = 0.05


def pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


class ChildProcess:
    """A `subprocess.Popen` child whose exit can be awaited by any number of tasks."""

    __slots__ = ("_before_reap", "_left", "_pidfd", "_waiting", "popen", "status")

    def __init__(self, popen: subprocess.Popen[bytes], before_reap: Callable[[], None] | None = None) -> None:
        self.popen = popen
        self._before_reap = before_reap
        self._pidfd = pidfd_open(popen.pid)
        # a task is inside `wait()`: it owns the reaping (a flag, not a Lock: one per process)
        self._waiting = False
        self._left: anyio.Event | None = None  # made only when a second task waits meanwhile
        self.status: ExitStatus | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _finish(self, returncode: int) -> ExitStatus:
        self.status = ExitStatus.from_returncode(returncode)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return self.status

    def _reap(self) -> ExitStatus | None:
        if self.status is not None:
            return self.status
        if self.popen.returncode is not None:
            return self._finish(self.popen.returncode)
        if self._pidfd is not None:
            # Still a zombie at worst: the pid and its group id are ours until reaped.
            try:
                exited = os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                exited = None
            if exited is None:
                return None
            if self._before_reap is not None:
                self._before_reap()
        returncode = self.popen.poll()
        if returncode is None:
            return None
        if self._pidfd is None and self._before_reap is not None:
            self._before_reap()
        return self._finish(returncode)

    def poll(self) -> ExitStatus | None:
        """The exit status if the child has ended (reaping it), else None.  Never blocks.

        While a task is inside `wait()` that task owns the reaping (and the pidfd it is
        polling), so `poll` only reports what is already known.
        """
        if self._waiting:
            return self.status
        return self._reap()

    async def wait(self) -> ExitStatus:
        await checkpoint_if_cancelled()
        while self._waiting:  # another task awaits the pidfd: take over when it leaves
            if self._left is None:
                self._left = anyio.Event()
            await self._left.wait()
        self._waiting = True
        try:
            await cancel_shielded_checkpoint()  # as the Lock's acquire did: others run first
            while True:
                status = self._reap()
                if status is not None:
                    return status
                if self._pidfd is not None:
                    await anyio.wait_readable(self._pidfd)
                else:
                    await anyio.sleep(_FALLBACK_POLL)
        finally:
            self._waiting = False
            left, self._left = self._left, None
            if left is not None:
                left.set()
