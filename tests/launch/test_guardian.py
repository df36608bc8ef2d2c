"""The guardian (a POSIX sh script, run by dash) on its own: what it kills when srtd's end of its pipe closes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from srtd.launch._guardian import Guardian


def _group(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(argv), start_new_session=True, stdout=subprocess.DEVNULL)


def _gone(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def test_on_eof_it_terms_the_registered_groups_kills_the_stubborn_and_spares_the_rest(tmp_path: Path) -> None:
    guardian = Guardian(grace=0.5)
    guardian.spawn()
    polite = _group("sleep", "60")
    stubborn = _group("sh", "-c", "trap '' TERM; while :; do sleep 0.1; done")
    released = _group("sleep", "60")
    try:
        time.sleep(0.2)  # the trap is set
        guardian.add(polite.pid)
        guardian.add(stubborn.pid)
        guardian.add(released.pid)
        guardian.remove(released.pid)
        # junk is skipped, never acted on: no group 0 or 1, no negative pid, no text, no
        # number past a pid's digits; leading zeros name the same group
        guardian._write("+1\n+abc\n-\n+-5\n\n+0\n+000\n+99999999999999999999\n+1 2\n")
        # a second add is one group; a zero-padded add is the same group as its plain remove
        guardian._write(f"+{polite.pid}\n+00{released.pid}\n-{released.pid}\n")
        proc = guardian.close()
        assert proc is not None
        assert proc.wait(10) == 0
        assert _gone(polite, 5) == -signal.SIGTERM
        assert _gone(stubborn, 5) == -signal.SIGKILL
        assert released.poll() is None
    finally:
        for p in (polite, stubborn, released):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_it_ignores_the_signals_a_terminal_sends_and_exits_quietly_with_nothing_registered() -> None:
    guardian = Guardian(grace=0.2)
    guardian.spawn()
    victim = _group("sleep", "60")
    try:
        guardian.add(victim.pid)
        pid = guardian.pid
        assert pid is not None
        time.sleep(0.2)  # the shell has set its traps
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            os.kill(pid, sig)
        time.sleep(0.2)
        assert victim.poll() is None  # still guarded: the guardian did not die of those
        guardian.remove(victim.pid)
        proc = guardian.close()
        assert proc is not None
        assert proc.wait(10) == 0
        assert victim.poll() is None
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait()


def test_it_runs_as_a_posix_shell_of_its_own_session() -> None:
    guardian = Guardian(grace=0.2)
    guardian.spawn()
    try:
        pid = guardian.pid
        assert pid is not None
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        assert exe == "dash"  # Debian's /bin/sh: half of bash's memory
        assert os.getsid(pid) == pid
    finally:
        proc = guardian.close()
        assert proc is not None
        assert proc.wait(10) == 0
