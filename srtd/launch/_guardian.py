"""The guardian: kills a launcher's process groups when srtd itself dies.

A bash script (`GUARDIAN`, run as `bash --norc --noprofile -c GUARDIAN guardian GRACE TRIES`):
about 2 MiB of memory where a Python interpreter is 9 MiB, and nothing of srtd's to
import.  srtd keeps the write end of the guardian's stdin and writes `+<pgid>` when a
unit's process group starts and `-<pgid>` when it has ended.  When stdin reaches EOF,
srtd has gone (normally or by SIGKILL): every group still registered gets SIGTERM,
then SIGKILL after GRACE seconds (TRIES checks 50 ms apart: bash has no fractions).
The guardian runs in its own session and ignores SIGINT, SIGTERM and SIGHUP, so
neither a Ctrl-C on the terminal nor a signal to srtd's process group takes it down
before it has done its job.  See docs/supervisor.md ("No orphans").
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess

POLL = 0.05  # seconds between the checks of whether the SIGTERMed groups are gone

# Only `+N` / `-N` lines with N > 1 count; anything else is skipped.  `kill -0` fails for a
# group that no longer exists (and for one not ours: EPERM), as `os.killpg` would.
GUARDIAN = r"""
trap '' INT TERM HUP
tries=$2
declare -A groups=()
while IFS= read -r line; do
    pgid=${line:1}
    [[ $pgid =~ ^[0-9]+$ ]] && (( 10#$pgid > 1 )) || continue
    case ${line:0:1} in
        +) groups[$((10#$pgid))]=1 ;;
        -) unset "groups[$((10#$pgid))]" ;;
    esac
done
(( ${#groups[@]} )) || exit 0
echo "srtd guardian: srtd is gone; stopping ${#groups[@]} process group(s)" >&2
alive=()
for g in "${!groups[@]}"; do
    kill -TERM -- "-$g" 2>/dev/null && alive+=("$g")
done
while (( ${#alive[@]} && tries-- > 0 )); do
    sleep 0.05
    still=()
    for g in "${alive[@]}"; do
        kill -0 -- "-$g" 2>/dev/null && still+=("$g")
    done
    alive=("${still[@]}")
done
for g in "${alive[@]}"; do
    kill -KILL -- "-$g" 2>/dev/null
done
exit 0
"""


def guardian_argv(grace: float) -> list[str]:
    bash = shutil.which("bash") or "/bin/bash"
    tries = max(math.ceil(grace / POLL), 0)
    return [bash, "--norc", "--noprofile", "-c", GUARDIAN, "guardian", repr(grace), str(tries)]


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
            guardian_argv(self.grace),
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
