"""`srtd` as a user runs it: its own process, in a given directory and environment.

The one way tests and perf scenarios start the CLI as a subprocess (in-process calls use
click's CliRunner).  The environment is this process's, minus any variable starting with
one of `drop` (a test run inside a Slurm allocation must not look like a batch job's), plus
`env`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SRTD = (sys.executable, "-m", "srtd")
REPO = Path(__file__).resolve().parents[1]


def srtd_env(env: dict[str, str] | None = None, *, drop: Sequence[str] = ("SLURM_",)) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop))}
    return kept | (env or {})


def run_srtd(
    *args: str,
    cwd: Path = REPO,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    drop: Sequence[str] = ("SLURM_",),
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """Run `srtd ARGS` to its end; its output captured as text; never raises on its exit code."""
    return subprocess.run(
        [*SRTD, *args],
        cwd=cwd,
        env=srtd_env(env, drop=drop),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **options,
    )


def start_srtd(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None, **options: Any
) -> subprocess.Popen[str]:
    """Start `srtd ARGS`; stdout and stderr together on one text pipe."""
    return subprocess.Popen(
        [*SRTD, *args],
        cwd=cwd,
        env=srtd_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **options,
    )


def ctrl_c(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """Stop `proc` as a terminal's Ctrl-C does; everything it printed."""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=timeout)
    return out


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill and wait for `proc` if a failed test left it running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def supervisor_handover(pid: int) -> dict[str, Any] | None:
    """What `srtd run` handed its supervisor, read off the process's argv
    (`python [flags] -m srtd.cli._supervise HANDOVER`); None for any other process."""
    import json

    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"-m" not in words:
        return None
    at = words.index(b"-m")
    if words[at + 1 : at + 2] != [b"srtd.cli._supervise"] or len(words) < at + 3:
        return None
    try:
        given = json.loads(words[at + 2])
    except ValueError:
        return None
    return given if isinstance(given, dict) else None
