"""Signals to steps, the launcher's side with stand-in Slurm tools: many steps go out in one scancel per
signal, and a stop sent before a step's task began is sent again once it has."""

from __future__ import annotations

import signal
import stat
from pathlib import Path

import anyio
import pytest

from srtd.launch import SlurmLauncher
from srtd.unit import Unit, UnitKind

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


def _tool(path: Path, script: str) -> str:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def test_a_stop_sent_before_the_task_began_is_sent_again_once_it_has(tmp_path: Path) -> None:
    # Slurm drops a signal to a step whose task is not launched yet, and srun launches it anyway.
    # The stand-in srun is that: it ignores SIGTERM, then its "task" records step 7.3 and runs on.
    log_dir = tmp_path / "logs"
    record = log_dir / ".srtd-steps" / "service_db.id"  # where the wrapper records its step
    began = tmp_path / "began"
    srun = _tool(tmp_path / "srun", f"trap '' TERM\ntouch {began}\nsleep 0.5\necho 7.3 > {record}\nsleep 30\n")
    scancel, calls = _stand_in(tmp_path)
    unit = Unit(name="service_db", kind=UnitKind.SERVICE, phase="infra", nodes=("n1",), argv=("db",), log="db.out")
    async with SlurmLauncher(job_id="7", log_dir=log_dir, srun=srun, scancel=str(scancel), squeue="false") as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=tmp_path / "db.out")
        with anyio.fail_after(10):
            while not began.exists():
                await anyio.sleep(0.01)
        await handle.signal(signal.SIGTERM)  # no step id yet, none in squeue: srun takes it (and ignores it)
        assert not calls.exists()
        with anyio.fail_after(10):
            while not calls.exists():
                await anyio.sleep(0.01)
        assert calls.read_text().splitlines() == ["--signal=TERM --full 7.3"]
        handle.kill_client()
        await handle.wait()


async def test_a_stop_sent_once_the_task_began_is_sent_once(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    record = log_dir / ".srtd-steps" / "service_db.id"  # where the wrapper records its step
    srun = _tool(tmp_path / "srun", f"echo 7.3 > {record}\nsleep 30\n")
    scancel, calls = _stand_in(tmp_path)
    unit = Unit(name="service_db", kind=UnitKind.SERVICE, phase="infra", nodes=("n1",), argv=("db",), log="db.out")
    async with SlurmLauncher(job_id="7", log_dir=log_dir, srun=srun, scancel=str(scancel), squeue="false") as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=tmp_path / "db.out")
        await handle.settle()
        await handle.signal(signal.SIGTERM)
        with anyio.fail_after(10):
            while not calls.exists():
                await anyio.sleep(0.01)
        await anyio.sleep(0.3)  # a second send would follow within the poll interval (20 ms)
        assert calls.read_text().splitlines() == ["--signal=TERM --full 7.3"]
        handle.kill_client()
        await handle.wait()
