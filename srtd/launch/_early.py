"""A node check started before the supervisor is imported: the local launcher's preflight, sooner.

`srtd run PLAN.json` on this machine knows the argv of its node's check (docs/nodes.md) once
it has read the plan, some 50 ms before the supervisor's modules are imported and its
launcher is entered.  Started then (`EarlyCheck`), the check runs on another core while srtd
imports, and `LocalLauncher.run_check` takes its result instead of starting the same check
again: the first unit no longer waits for the check's interpreter to start.

Its output goes to memory files (`memfd_create`), read once it has ended: a check that says
more than a pipe holds never blocks on srtd, which reads nothing until then.  What it
reports is what `slurm_tool` reports for the same argv: its exit status, its output, or why
it could not run or did not end within its time.  Light: nothing of anyio or the supervisor
is imported until its result is awaited.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srtd.launch._tool import ToolRun


class EarlyCheck:
    """One check's process, started at once; `result` awaits it, `discard` ends it unread."""

    def __init__(self, argv: Sequence[str]) -> None:
        """Started at once; OSError (and nothing left open) when its memory files cannot be made."""
        self.argv = tuple(argv)
        out = os.memfd_create("srtd-check-out")
        try:
            err = os.memfd_create("srtd-check-err")
        except OSError:
            os.close(out)
            raise
        self._files: tuple[int, int] | None = (out, err)
        self._refused: OSError | None = None  # why it could not start
        self.popen: subprocess.Popen[bytes] | None = None
        try:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True)
        except OSError as e:
            self._refused = e

    @property
    def pid(self) -> int | None:
        """The check's pid while it is srtd's child (not reaped yet)."""
        return self.popen.pid if self.popen is not None and self.popen.returncode is None else None

    async def result(self, timeout: float) -> ToolRun:
        """What the check did, within `timeout` s of now; then it is discarded."""
        import anyio

        from srtd.launch._process import ChildProcess
        from srtd.launch._tool import ToolRun, refused_run, timed_out_run

        try:
            if self.popen is None:
                assert self._refused is not None
                return refused_run(self.argv, self._refused)
            child = ChildProcess(self.popen)
            try:
                with anyio.move_on_after(timeout):
                    await child.wait()
                    return ToolRun(self.argv, self.popen.returncode, self._read(0), self._read(1))
            finally:
                if self.popen.returncode is None:  # timed out, or the job stopped meanwhile
                    with contextlib.suppress(OSError):
                        self.popen.kill()
                    with anyio.CancelScope(shield=True):
                        await child.wait()
            return timed_out_run(self.argv, timeout)
        finally:
            self.discard()

    def _read(self, which: int) -> str:
        assert self._files is not None
        fd = self._files[which]
        os.lseek(fd, 0, os.SEEK_SET)  # the check wrote through the same open file
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def discard(self) -> None:
        """Ended (killed if it still runs) and reaped; its files closed.  Idempotent."""
        if self.popen is not None and self.popen.returncode is None:
            with contextlib.suppress(OSError):
                self.popen.kill()
            self.popen.wait()  # killed: at once
        files, self._files = self._files, None
        for fd in files or ():
            os.close(fd)
