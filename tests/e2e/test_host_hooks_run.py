"""`srtd run` with host hooks on this machine: the setup steps end before anything of the job
starts, the teardown steps run once every unit's process is gone (after success, a failure
and Ctrl-C), a hung hook is stopped at its timeout, and `ignore_failure` lets the job go on."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from srtd.events import Event
from tests.command import ctrl_c, reap
from tests.e2e.test_local_run import srtd
from tests.supervisor.helpers import assert_cancelled_by_sigint, assert_no_leftovers, check_journal, wait_for

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "features" / "node-hooks.yaml"

pytestmark = pytest.mark.slow

# Run by a teardown hook: every process of this job (its environment names the job's log
# directory and a unit) other than the teardown hooks themselves, one `unit pid` a line.
SCAN = """\
import os, sys
log_dir = sys.argv[1]
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        env = dict(v.split("=", 1) for v in open(f"/proc/{pid}/environ").read().split("\\0") if "=" in v)
    except OSError:
        continue
    unit = env.get("SRTD_UNIT", "")
    if env.get("SRTD_LOG_DIR") == log_dir and unit and not unit.startswith("host_teardown"):
        print(unit, pid)
"""


def recipe(tmp_path: Path, **host_setup: object) -> Path:
    """The example recipe with a setup that takes a second and a teardown that scans /proc."""
    data = YAML(typ="safe").load(RECIPE.read_text())
    (tmp_path / "scan.py").write_text(SCAN)
    data["host_setup"] = {
        "timeout_seconds": 30,
        "commands": ['sleep 1; date +%s.%N > "$SRTD_LOG_DIR/$SRTD_UNIT.done"'],
        "teardown": [f'{sys.executable} {tmp_path / "scan.py"} "$SRTD_LOG_DIR" > "$SRTD_LOG_DIR/$SRTD_UNIT.scan"'],
        **host_setup,
    }
    path = tmp_path / "hooks.yaml"
    with path.open("w") as f:
        YAML().dump(data, f)
    return path


def run(recipe_file: Path, log_dir: Path, *extra: str) -> tuple[int, str, list[Event]]:
    proc = srtd("run", str(recipe_file), "--log-dir", str(log_dir), *extra)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # its teardown ends what it started
            proc.communicate(timeout=60)
    return proc.returncode, out, check_journal(log_dir / "events.jsonl", [])


def at(journal: list[Event], unit: str, state: str) -> Event:
    return next(e for e in journal if e.unit == unit and e.state == state)


def assert_torn_down_after_the_job(journal: list[Event], log_dir: Path) -> None:
    """The teardown step started after every other unit ended, and saw none of their processes."""
    units = [e.unit for e in journal if e.unit and e.state == "starting"]
    others = [u for u in units if not u.startswith("host_teardown")]
    teardown = journal.index(at(journal, "host_teardown_node1", "starting"))
    last_other = max(i for i, e in enumerate(journal) if e.unit in others)
    assert teardown > last_other
    assert at(journal, "host_teardown_node1", "stopped").exit_code == 0
    assert (log_dir / "host_teardown_node1.scan").read_text() == ""
    assert (log_dir / "host_teardown_node1.out").exists()


def test_setup_ends_before_the_job_starts_and_teardown_runs_after_it(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    code, out, journal = run(recipe(tmp_path), log_dir)
    assert code == 0, out
    done = float((log_dir / "host_setup_node1.done").read_text())
    starts = [e for e in journal if e.state == "starting" and e.unit and not e.unit.startswith("host_")]
    assert [e.unit for e in starts] == ["agg_0_node1", "frontend_0", "benchmark"]
    # the setup step had written its file (after a second's work) before the first worker launched
    assert done < starts[0].ts
    assert journal.index(at(journal, "host_setup_node1", "stopped")) < journal.index(starts[0])
    assert_torn_down_after_the_job(journal, log_dir)
    assert journal[-1].state == "succeeded"
    assert "host_teardown_node1" in out  # the summary lists the hooks like every unit
    postmortem_free = not (log_dir / "postmortem.txt").exists()
    assert postmortem_free
    assert_no_leftovers(str(log_dir))


def test_a_failed_job_still_runs_its_teardown_after_its_units(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    path = recipe(tmp_path)
    data = YAML(typ="safe").load(path.read_text())
    # a critical service that dies once the frontend is up: the job fails with the worker running
    crash = {"name": "crash", "command": ["bash", "-c", "sleep 1; exit 4"], "start": "after_frontend", "critical": True}
    data["services"] = [crash]
    data["benchmark"] = {"type": "manual"}
    with path.open("w") as f:
        YAML().dump(data, f)
    code, out, journal = run(path, log_dir)
    assert code == 1, out
    assert journal[-1].reason == "service_crash failed: exited with exit code 4"
    assert at(journal, "agg_0_node1", "stopped").reason == "stopped"  # it ran until the teardown
    assert_torn_down_after_the_job(journal, log_dir)
    # the post-mortem lists the host steps with the other units
    postmortem = (log_dir / "postmortem.txt").read_text()
    assert "host_setup_node1" in postmortem
    assert "host_teardown_node1" in postmortem
    assert_no_leftovers(str(log_dir))


def test_ctrl_c_runs_the_teardown_after_the_units(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    path = recipe(tmp_path)
    data = YAML(typ="safe").load(path.read_text())
    data["benchmark"] = {"type": "manual"}  # held until stopped
    with path.open("w") as f:
        YAML().dump(data, f)
    proc = srtd("run", str(path), "--log-dir", str(log_dir))
    try:
        wait_for(log_dir, lambda es: any(e.unit is None and e.state == "running" for e in es))
        # the teardown's scan does see the job's processes while they run
        seen = subprocess.run(
            [sys.executable, str(tmp_path / "scan.py"), str(log_dir)], capture_output=True, text=True, check=True
        )
        assert sorted(line.split()[0] for line in seen.stdout.splitlines()) == ["agg_0_node1", "frontend_0"]
        out = ctrl_c(proc)
    finally:
        reap(proc)
    assert_cancelled_by_sigint(proc.returncode, out, log_dir)
    journal = check_journal(log_dir / "events.jsonl", [])
    assert_torn_down_after_the_job(journal, log_dir)


def test_a_failed_setup_fails_the_job_before_anything_starts(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    path = recipe(tmp_path, commands=["echo checking clocks", "exit 3", "echo never"])
    code, out, journal = run(path, log_dir)
    assert code == 1, out
    assert journal[-1].reason == "host_setup_node1 failed: exited with exit code 3"
    detail = dict(journal[-1].detail or {})
    postmortem = detail.pop("postmortem")
    assert detail == {"culprit": "host_setup_node1"}
    assert (postmortem["unit"], postmortem["exit_code"], postmortem["log"]) == (
        "host_setup_node1",
        3,
        ["checking clocks"],
    )
    assert [e.unit for e in journal if e.state == "starting" and e.unit] == ["host_setup_node1", "host_teardown_node1"]
    # the commands ran in order and stopped at the first that failed
    assert (log_dir / "host_setup_node1.out").read_text() == "checking clocks\n"
    assert_torn_down_after_the_job(journal, log_dir)
    assert_no_leftovers(str(log_dir))


def test_a_hung_setup_is_stopped_at_its_timeout_and_ignore_failure_goes_on(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    path = recipe(tmp_path, commands=["sleep 300"], timeout_seconds=2, ignore_failure=True)
    code, out, journal = run(path, log_dir)
    assert code == 0, out
    failed = at(journal, "host_setup_node1", "failed")
    assert failed.reason == "did not finish within 2 s"
    assert failed.detail == {"ignored": True}
    assert 1.5 < failed.ts - at(journal, "host_setup_node1", "starting").ts < 10.0
    # one warning line says it, and the job went on to its benchmark
    assert "host_setup_node1 failed (not critical: the job goes on)" in out
    assert at(journal, "benchmark", "stopped").exit_code == 0
    assert_torn_down_after_the_job(journal, log_dir)
    assert_no_leftovers(str(log_dir))
