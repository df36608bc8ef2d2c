"""An srun client that dies is not a step that ended: srtd kills the step before it relaunches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import final_job_event, job_state, journal, squeue_steps, wait_for
from tests.slurm.test_signals import short_timeouts, start_job

pytestmark = pytest.mark.usefixtures("slurm")


def restart_the_first_worker(plan: dict[str, Any]) -> None:
    short_timeouts(plan)
    for unit in plan["units"]:
        if unit["name"] == "agg_0_node1":
            unit["restart"] = {**unit["restart"], "policy": "on-failure", "backoff_seconds": 1.0}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_srun_client_gets_its_step_killed_and_the_unit_restarts_as_r1(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    job, log_dir, record = start_job(tmp_path, token, edit=restart_the_first_worker)
    srun_pid = next(e["pid"] for e in journal(log_dir) if e.get("unit") == "agg_0_node1" and e["state"] == "starting")
    task_pid = json.loads((record / "agg_0_node1.0.start").read_text())["pid"]
    old_step = json.loads((record / "agg_0_node1.0.start").read_text())["step"]
    assert squeue_steps(job)[old_step] == "agg_0_node1"
    os.kill(srun_pid, signal.SIGKILL)
    wait_for("the restart as agg_0_node1_r1", (record / "agg_0_node1.1.start").exists, timeout=60)
    # By the time srtd relaunched, the old step and its task were gone.
    assert old_step not in squeue_steps(job)
    assert not alive(task_pid)
    again = json.loads((record / "agg_0_node1.1.start").read_text())
    assert again["step_name"] == "agg_0_node1_r1"
    assert squeue_steps(job)[again["step"]] == "agg_0_node1_r1"
    events = [e for e in journal(log_dir) if e.get("unit") == "agg_0_node1"]
    assert [e["state"] for e in events if e["state"] in ("exited", "backoff")] == ["exited", "backoff"]
    assert next(e for e in events if e["state"] == "exited")["signal"] == signal.SIGKILL
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True)
    wait_for(f"job {job} to end", lambda: job_state(job).get("JobState") not in ("RUNNING", "COMPLETING"))
    assert final_job_event(journal(log_dir))["exit_code"] == 138
    nothing_left(job)
