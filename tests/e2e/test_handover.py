"""`srtd run` plans, then execs its supervisor in the same process (docs/supervisor.md, the
handover): the job runs in `python -m srtd.cli._supervise`, and a stop signal that comes
while the one program becomes the other is acted on, not lost and not fatal."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from srtd.errors import exit_for_signal
from tests.command import REPO, srtd_env, supervisor_handover
from tests.supervisor.helpers import assert_no_leftovers, check_journal, wait_for

pytestmark = pytest.mark.slow

DEMO = REPO / "recipes" / "local" / "demo.yaml"
IMPORTED = "import time:"


def _start(log_dir: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *flags, "-m", "srtd", "run", str(DEMO), "--log-dir", str(log_dir), "--plain"],
        cwd=REPO,
        env=srtd_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_job_runs_in_the_supervisor_program_under_the_same_pid(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = _start(log_dir)
    try:
        journal = log_dir / "events.jsonl"
        wait_for(log_dir, lambda events: any(e.state == "ready" for e in events))
        handover = supervisor_handover(proc.pid)  # the same pid runs `python -m srtd.cli._supervise`
        assert handover is not None
        assert handover["plan"] == str(log_dir.resolve() / "plan.json")  # the plan it wrote, as it runs
        assert (handover["saved"], handover["local"]) == (False, True)
        # the port claim's descriptor, inherited through the exec, and private again there
        path, fd = handover["claim"]
        assert Path(f"/proc/{proc.pid}/fd/{fd}").resolve() == Path(path)
        assert "FD_CLOEXEC" in _fd_flags(proc.pid, fd)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == exit_for_signal(signal.SIGTERM), err
    assert check_journal(journal, [])[-1].state == "cancelled"
    assert not Path(path).exists()  # the claim is released as the job ends
    assert_no_leftovers(str(log_dir))


def test_a_stop_signal_during_the_handover_waits_for_the_supervisor(tmp_path: Path) -> None:
    """SIGTERM while the supervisor's program imports, before it has a handler: blocked through
    the exec, it waits, then stops the job (without the block it would kill srtd outright)."""
    log_dir = tmp_path / "logs"
    proc = _start(log_dir, "-X", "importtime")
    assert proc.stderr is not None
    seen = 0
    for line in proc.stderr:
        # imported by the command, then again by the program it execs, before that one's handlers
        if line.startswith(IMPORTED) and line.rstrip().split("|")[-1].strip() == "srtd.cli._outcome":
            seen += 1
            if seen == 2:
                break
    assert seen == 2
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    said = [line for line in rest.splitlines() if not line.startswith(IMPORTED)]
    assert proc.returncode == exit_for_signal(signal.SIGTERM), "\n".join(said)
    journal = check_journal(log_dir / "events.jsonl", [])
    assert journal[-1].state == "cancelled"
    assert "SIGTERM" in (journal[-1].reason or "")
    assert not any("Traceback" in line for line in said)
    assert_no_leftovers(str(log_dir))


def _fd_flags(pid: int, fd: int) -> str:
    flags = int(Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0], 8)
    return "FD_CLOEXEC" if flags & 0o2000000 else ""  # O_CLOEXEC in fdinfo's flags
