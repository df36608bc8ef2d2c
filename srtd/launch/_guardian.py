"""The guardian: kills a launcher's process groups when srtd itself dies.

A POSIX shell script (`GUARDIAN`, run as `dash -c GUARDIAN guardian GRACE TRIES`): about
1.6 MiB of memory where bash takes 3.1 and a Python interpreter 9, and nothing of srtd's to
import.  srtd keeps the write end of the guardian's stdin and writes `+<pgid>` when a
unit's process group starts and `-<pgid>` when it has ended.  When stdin reaches EOF,
srtd has gone (normally or by SIGKILL): every group still registered gets SIGTERM,
then SIGKILL after GRACE seconds (TRIES checks 50 ms apart: the shell has no fractions).
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

# Only `+N` / `-N` lines with N > 1 count; anything else is skipped.  The registered groups
# are one string of numbers between spaces (POSIX sh has no sets): leading zeros are
# stripped so that `+007` and `-7` name one group, and more than 9 digits is no pid.
# `kill -s 0` fails for a group that no longer exists (and for one not ours: EPERM), as
# `os.killpg` would; `-s SIG --` is the spelling dash's kill takes before a negative pid.
GUARDIAN = r"""
trap '' INT TERM HUP
tries=$2
groups=' '
while IFS= read -r line; do
    pgid=${line#?}
    case $pgid in ''|*[!0-9]*) continue ;; esac
    while :; do case $pgid in 0?*) pgid=${pgid#0} ;; *) break ;; esac; done
    [ ${#pgid} -le 9 ] && [ "$pgid" -gt 1 ] || continue
    case $line in
        +*) case $groups in *" $pgid "*) ;; *) groups="$groups$pgid " ;; esac ;;
        -*) case $groups in *" $pgid "*) groups="${groups%%" $pgid "*} ${groups#*" $pgid "}" ;; esac ;;
    esac
done
set -- $groups
[ $# -gt 0 ] || exit 0
echo "srtd guardian: srtd is gone; stopping $# process group(s)" >&2
alive=
for g do
    kill -s TERM -- "-$g" 2>/dev/null && alive="$alive $g"
done
while [ -n "$alive" ] && [ "$tries" -gt 0 ]; do
    tries=$((tries - 1))
    sleep 0.05
    still=
    for g in $alive; do
        kill -s 0 -- "-$g" 2>/dev/null && still="$still $g"
    done
    alive=$still
done
for g in $alive; do
    kill -s KILL -- "-$g" 2>/dev/null
done
exit 0
"""


def guardian_argv(grace: float) -> list[str]:
    # dash where there is one (Debian's /bin/sh); any POSIX sh runs the script the same
    shell = shutil.which("dash") or shutil.which("sh") or "/bin/sh"
    tries = max(math.ceil(grace / POLL), 0)
    return [shell, "-c", GUARDIAN, "guardian", repr(grace), str(tries)]


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
