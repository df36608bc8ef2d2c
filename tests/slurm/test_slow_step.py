"""A stop while srun still waits for Slurm to create a step does not wait for it.

Slurm can take long to create a step (busy nodes); srtd waits up to 20 s for the step's
id, but a teardown must not.  The dev cluster creates steps at once, so one unit's
`srun` is a stand-in that holds back for minutes before it execs the real srun; every
other step is real.  The stand-in's path carries the test's token, so a stand-in left
running would show in the process table check.

The first test's stop comes once the real `registry` step is ready, so only the
stand-in's step is in the way.  The second holds the registry's step between its
creation and its task's launch (srun's `--prolog`), where Slurm drops a step signal and
srun, signalled, still launches the task: srtd must send the stop again once the task runs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    custom_job,
    final_job_event,
    journal,
    plan_job,
    proc_command,
    run_script,
    sbatch,
    unit_finals,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")

SLOW_SRUN = """\
import os, shutil, sys, time
from pathlib import Path
here = Path(sys.argv[0]).resolve().parent
args = sys.argv[1:]
if "--job-name=service_slow" in args:
    (here / "slow-srun-started").write_text(str(os.getpid()))
    time.sleep(600)  # Slurm "still creating the step"; SIGTERM ends it
if "--job-name=service_registry" in args and (here / "hold.sh").exists():
    args = ["--prolog=" + str(here / "hold.sh"), *args]  # srun runs it once the step exists, before its task
path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != here)
os.execv(shutil.which("srun", path=path), ["srun", *args])
"""

# The registry's step exists but its task is not launched yet: srun runs its prolog.
HOLD = """\
#!/bin/sh
touch "$(dirname "$0")/holding"
sleep 3
"""


def stand_in_srun(tmp_path: Path, token: str, *, hold: bool = False) -> Path:
    """The directory holding the stand-in srun (and, with `hold`, the registry's prolog)."""
    bin_dir = tmp_path / token / "bin"
    bin_dir.mkdir(parents=True)
    srun = bin_dir / "srun"
    srun.write_text(f"#!{sys.executable}\n{SLOW_SRUN}")
    srun.chmod(0o755)
    if hold:
        (bin_dir / "hold.sh").write_text(HOLD)
        (bin_dir / "hold.sh").chmod(0o755)
    return bin_dir


def submit(tmp_path: Path, token: str, bin_dir: Path, services: str = "") -> tuple[str, Path]:
    """Submit a custom job whose steps start through the stand-in srun: (job id, log dir)."""
    recipe = tmp_path / "job.yaml"
    recipe.write_text(custom_job("slow", token, tmp_path / "record", services=services))
    log_dir = tmp_path / "logs"
    plan = plan_job(recipe, tmp_path, "node[1-2]", log_dir)
    script = run_script(plan, 2).replace("\nexec ", f"\nexport PATH={bin_dir}:$PATH\nexec ", 1)
    return sbatch(script, tmp_path, "--nodelist=node[1-2]"), log_dir


def ready(log_dir: Path, unit: str) -> bool:
    path = log_dir / "events.jsonl"
    return path.exists() and any(e.get("unit") == unit and e["state"] == "ready" for e in journal(log_dir))


def timeline(events: list[dict[str, Any]]) -> str:
    """The journal as `+seconds unit state`, to say where a slow teardown spent its time."""
    start = events[0]["ts"]
    return "\n".join(f"+{e['ts'] - start:.3f} {e.get('unit') or 'job'} {e['state']}" for e in events)


def test_a_stop_while_srun_waits_for_its_step_ends_the_job_at_once(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    bin_dir = stand_in_srun(tmp_path, token)
    record = tmp_path / "record"
    slow = f"""\
  - name: slow
    command: {proc_command(token, record)}
    start: infra
    placement: {{node: head}}
"""
    job, log_dir = submit(tmp_path, token, bin_dir, slow)

    wait_for("the stand-in srun to hold back", (bin_dir / "slow-srun-started").exists, timeout=180)
    wait_for("the registry to be ready", lambda: ready(log_dir, "service_registry"), timeout=60)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True)
    asked = time.monotonic()
    wait_for(f"job {job} to end", lambda: final_job_event(journal(log_dir))["state"] == "cancelled", timeout=60)
    # srtd waits 20 s for a step id; a teardown that waited for it would take that long
    assert time.monotonic() - asked < 15, timeline(journal(log_dir))

    events = journal(log_dir)
    assert [e["state"] for e in events if e.get("unit") == "service_slow"] == ["starting", "stopping", "stopped"]
    starting = next(e for e in events if e.get("unit") == "service_slow")
    assert "step" not in (starting.get("detail") or {})  # Slurm never made one
    stop = next(e for e in events if e.get("unit") is None and e["state"] == "stopping")
    finals = unit_finals(events)
    assert finals["service_slow"]["ts"] - stop["ts"] < 10
    assert finals["service_slow"]["signal"] == 15  # srtd's SIGTERM reached the waiting srun
    assert not (record / "service_slow.0.start").exists()  # the unit itself never ran
    nothing_left(job)


def test_a_stop_while_slurm_launches_a_task_reaches_the_task_once_it_runs(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    # Slurm loses a signal sent to a step whose task it has not launched yet, and srun,
    # signalled then, launches the task anyway: srtd sends the stop again once the task runs.
    bin_dir = stand_in_srun(tmp_path, token, hold=True)
    record = tmp_path / "record"
    job, log_dir = submit(tmp_path, token, bin_dir)

    wait_for("the registry's step to hold before its task", (bin_dir / "holding").exists, timeout=180)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True)
    wait_for(f"job {job} to end", lambda: final_job_event(journal(log_dir))["state"] == "cancelled", timeout=90)

    events = journal(log_dir)
    registry = unit_finals(events)["service_registry"]
    # Not "killed after 30 s (SIGTERM not obeyed)": the default terminate timeout, spent
    # on a task that never got the SIGTERM.
    assert (registry["state"], registry["reason"]) == ("stopped", "stopped"), timeline(events)
    assert (log_dir / ".srtd-steps" / "service_registry.id").read_text().startswith(f"{job}.")  # the task did begin
    if (record / "service_registry.0.start").exists():  # its program ran: the SIGTERM reached it
        assert (record / "service_registry.0.term").exists()
        assert registry["exit_code"] == 0
    else:  # the SIGTERM ended the task's wrapper before its program ran
        assert registry["signal"] == 15
    nothing_left(job)
