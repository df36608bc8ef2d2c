"""`srtd run` on this machine whose benchmark leaves a setsid() process behind: the process
does not outlive the job, the journal and the console name it, and the exit code stays
the benchmark's (docs/failures.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.e2e.test_local_run import DEMO, srtd
from tests.supervisor.helpers import assert_no_leftovers, check_journal

pytestmark = pytest.mark.slow

# Leaves the benchmark's session, says its pid, and sleeps far past the job.
ESCAPEE = """\
import os, sys, time
os.setsid()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def escaping_recipe(tmp_path: Path) -> tuple[Path, Path]:
    """The demo whose benchmark starts the escapee, waits until it has escaped, and exits 0."""
    script, pidfile = tmp_path / "escape.py", tmp_path / "escapee.pid"
    script.write_text(ESCAPEE)
    data = YAML(typ="safe").load(DEMO.read_text())
    data["benchmark"] = {
        "type": "custom",
        "command": f"{sys.executable} {script} {pidfile} & while [ ! -s {pidfile} ]; do sleep 0.05; done",
    }
    path = tmp_path / "escape.yaml"
    with path.open("w") as f:
        YAML().dump(data, f)
    return path, pidfile


def test_a_process_that_left_the_benchmarks_session_is_reported_and_ended(tmp_path: Path) -> None:
    recipe, pidfile = escaping_recipe(tmp_path)
    log_dir = tmp_path / "logs"
    proc = srtd("run", str(recipe), "--log-dir", str(log_dir))
    out, _ = proc.communicate(timeout=120)
    escapee = int(pidfile.read_text())
    assert not Path(f"/proc/{escapee}").exists(), "the escapee outlived the job (or is an unreaped zombie)"
    assert proc.returncode == 0, out  # the benchmark's own exit code: the stray is ended, not a failure
    journal = check_journal(log_dir / "events.jsonl", [])
    strays = [e for e in journal if e.detail and "stray" in e.detail]
    assert [(e.unit, e.state, e.detail["stray"]["pid"], e.detail["stray"]["unit"]) for e in strays] == [
        (None, "stopping", escapee, "benchmark")
    ]
    assert str(tmp_path / "escape.py") in strays[0].detail["stray"]["command"]
    # after every unit's final event, before the job's
    position = journal.index(strays[0])
    assert all(journal.index(e) < position for e in journal if e.unit is not None)
    assert journal[-1].state == "succeeded"
    assert journal[-1].exit_code == 0
    assert f"process {escapee} (" in out
    assert "outlived unit benchmark, which left it behind: ending it (SIGTERM, then SIGKILL after" in out
    assert_no_leftovers(str(log_dir))


def test_the_demo_leaves_nothing_behind_and_reports_no_stray(tmp_path: Path) -> None:
    """No false report: the guardian, the toy processes and srtd's own children are not strays."""
    log_dir = tmp_path / "logs"
    proc = srtd("run", str(DEMO), "--log-dir", str(log_dir))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    journal = check_journal(log_dir / "events.jsonl", [])
    assert [e for e in journal if e.detail and "stray" in e.detail] == []
    assert "outlived unit" not in out
    assert_no_leftovers(str(log_dir))
