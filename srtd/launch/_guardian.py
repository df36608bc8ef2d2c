"""The guardian: kills a launcher's process groups when srtd itself dies.

Run as `python -I <this file> GRACE` (standard library only, so it starts fast and
imports nothing of srtd's).  srtd keeps the write end of the guardian's stdin and
writes `+<pgid>` when a unit's process group starts and `-<pgid>` when it has
ended.  When stdin reaches EOF, srtd has gone (normally or by SIGKILL): every group
still registered gets SIGTERM, then SIGKILL after GRACE seconds.  The guardian runs
in its own session and ignores SIGINT, SIGTERM and SIGHUP, so neither a Ctrl-C on the
terminal nor a signal to srtd's process group takes it down before it has done its
job.  See docs/supervisor.md ("No orphans").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable

_POLL = 0.05


def _send(pgid: int, sig: int) -> bool:
    """Signal a group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def reap(groups: Iterable[int], grace: float) -> None:
    """SIGTERM every group, wait up to `grace` for them to go, SIGKILL the rest."""
    alive = {g for g in groups if _send(g, signal.SIGTERM)}
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL)
        alive = {g for g in alive if _send(g, 0)}
    for g in alive:
        _send(g, signal.SIGKILL)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    grace = float(argv[1]) if len(argv) > 1 else 5.0
    groups: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if len(line) < 2 or line[:1] not in (b"+", b"-"):
            continue
        try:
            pgid = int(line[1:])
        except ValueError:
            continue
        if pgid <= 1:
            continue
        if line[:1] == b"+":
            groups.add(pgid)
        else:
            groups.discard(pgid)
    if groups:
        print(
            f"srtd guardian: srtd is gone; stopping {len(groups)} process group(s)",
            file=sys.stderr,
            flush=True,
        )
        reap(groups, grace)
    return 0


class Guardian:
    """srtd's end of the guardian: spawn it, register and unregister groups."""

    def __init__(self, grace: float = 5.0) -> None:
        self.grace = grace
        self._proc: subprocess.Popen[bytes] | None = None
        self._broken = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def spawn(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), repr(self.grace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )

    def _write(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or self._broken:
            return
        try:
            os.write(proc.stdin.fileno(), line.encode())
        except OSError:
            # The guardian is gone; the setpriv pdeathsig (if any) is what is left.
            self._broken = True

    def add(self, pgid: int) -> None:
        self._write(f"+{pgid}\n")

    def remove(self, pgid: int) -> None:
        self._write(f"-{pgid}\n")

    def close(self) -> subprocess.Popen[bytes] | None:
        """Close the pipe: the guardian reaps what is still registered and exits.

        Returns the guardian's process so the caller can await its exit.
        """
        proc = self._proc
        self._proc = None
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
        return proc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
