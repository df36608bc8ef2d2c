"""Signals to many steps go out in one scancel per signal (the launcher's side, with a stand-in scancel)."""

from __future__ import annotations

import signal
import stat
from pathlib import Path

import anyio
import pytest

from srtd.launch import SlurmLauncher

pytestmark = pytest.mark.anyio


def _stand_in(tmp_path: Path) -> tuple[Path, Path]:
    """An executable `scancel` that appends its argv (one line per call) to a file."""
    calls = tmp_path / "calls"
    tool = tmp_path / "scancel"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool, calls


async def test_a_tier_of_steps_signalled_together_is_one_scancel_per_signal(tmp_path: Path) -> None:
    tool, calls = _stand_in(tmp_path)
    async with SlurmLauncher(job_id="7", log_dir=tmp_path / "logs", scancel=str(tool), squeue="false") as launcher:
        for i in range(300):
            launcher.send(f"7.{i}", signal.SIGTERM)
        launcher.send("7.400", signal.SIGKILL)
        launcher.send("7.401", signal.SIGKILL)
        with anyio.fail_after(10):
            while not calls.exists() or len(calls.read_text().splitlines()) < 3:
                await anyio.sleep(0.01)
    lines = sorted(calls.read_text().splitlines())
    term = [line.split() for line in lines if line.startswith("--signal=TERM")]
    kill = [line.split() for line in lines if line.startswith("--signal=KILL")]
    # 300 SIGTERMs: two calls (at most 256 ids each), every step exactly once, with --full
    assert [len(argv) for argv in sorted(term, key=len)] == [2 + 44, 2 + 256]
    assert sorted(word for argv in term for word in argv[2:]) == sorted(f"7.{i}" for i in range(300))
    assert all(argv[1] == "--full" for argv in term)
    assert kill == [["--signal=KILL", "7.400", "7.401"]]


async def test_a_signal_sent_later_is_a_scancel_of_its_own(tmp_path: Path) -> None:
    tool, calls = _stand_in(tmp_path)
    async with SlurmLauncher(job_id="7", log_dir=tmp_path / "logs", scancel=str(tool), squeue="false") as launcher:
        launcher.send("7.0", signal.SIGTERM)
        with anyio.fail_after(10):
            while not calls.exists():
                await anyio.sleep(0.01)
        launcher.send("7.1", signal.SIGTERM)
        with anyio.fail_after(10):
            while len(calls.read_text().splitlines()) < 2:
                await anyio.sleep(0.01)
    assert calls.read_text().splitlines() == ["--signal=TERM --full 7.0", "--signal=TERM --full 7.1"]
