"""A node dies under a running job (slurmd, slurmstepd and tasks SIGKILLed, no liveness).

Slurm itself says nothing for SlurmdTimeout (300 s here); srtd's presence check must
notice within 15 s, end the job as the policy says, tear down inside KillWait + 5 s, and
leave no step once Slurm declares the node down (docs/failures.md).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    custom_job,
    final_job_event,
    job_listed,
    journal,
    plan_job,
    run_script,
    sbatch,
    squeue_steps,
    unit_finals,
    wait_for,
)
from tests.slurm.node_loss import kill_node, mark_down, restore

pytestmark = pytest.mark.usefixtures("slurm")

KILL_WAIT = 10  # scripts/slurm-dev-cluster
DETECTION = 15  # the default bound (node_lost_seconds 10 + check interval 3 + connect 2)
LOST = "agg_1_node2"


@pytest.fixture
def cluster_restored() -> Iterator[None]:
    """Whatever the test did to a node, the cluster is whole again afterwards."""
    yield
    restore()


def _start(tmp_path: Path, token: str, edit: Callable[[dict[str, Any]], None] | None = None) -> tuple[str, Path, Path]:
    record = tmp_path / "record"
    recipe = tmp_path / "lost.yaml"
    recipe.write_text(custom_job("lost", token, record))
    log_dir = tmp_path / "logs"
    plan = plan_job(recipe, tmp_path, "node[1-2]", log_dir, edit)
    # --no-requeue: marking node2 down afterwards must not bring the job back.
    job = sbatch(run_script(plan, 2), tmp_path, "--nodelist=node[1-2]", "--no-requeue")
    journal_path = log_dir / "events.jsonl"

    def running() -> bool:
        return journal_path.exists() and any(e["state"] == "running" for e in journal(log_dir))

    wait_for("the job to run", running, timeout=120)
    return job, log_dir, record


def _end(job: str, log_dir: Path) -> dict[str, Any]:
    def ended() -> bool:
        return final_job_event(journal(log_dir))["state"] in ("failed", "succeeded", "cancelled")

    wait_for(f"job {job} to end", ended, timeout=90)
    return final_job_event(journal(log_dir))


def _after_restore(job: str) -> None:
    """srtd has ended: what it left to Slurm is gone once Slurm declares the node down."""
    wait_for(f"job {job}'s batch script to exit", lambda: job_phase(job) in ("", "COMPLETING"), timeout=60)
    mark_down("node2")
    wait_for(f"job {job} to leave squeue", lambda: not job_listed(job), timeout=60)
    restore()
    assert squeue_steps(job) == {}


def job_phase(job: str) -> str:
    done = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job}", "--format=%T"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def test_a_critical_worker_on_a_lost_node_fails_the_job_naming_the_node(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    job, log_dir, _ = _start(tmp_path, token)
    killed = kill_node("node2", job)
    at = time.time()
    assert killed["slurmstepd"], killed
    assert killed["tasks"], killed

    end = _end(job, log_dir)
    events = journal(log_dir)
    lost = unit_finals(events)[LOST]
    assert lost["state"] == "failed"
    assert lost["reason"].startswith("node node2 lost (slurmd at 127.0.0.3:17002 has not answered for "), lost
    assert lost["ts"] - at <= DETECTION
    assert end["state"] == "failed"
    assert end["exit_code"] == 1
    assert end["reason"].startswith(f"{LOST} failed: node node2 lost (")
    assert end["detail"]["culprit"] == LOST
    stopping = next(e for e in events if e.get("unit") is None and e["state"] == "stopping")
    assert end["ts"] - stopping["ts"] <= KILL_WAIT + 5
    finals = unit_finals(events)
    assert finals["agg_0_node1"]["state"] == "stopped"
    assert finals["service_registry"]["state"] == "stopped"
    assert "left to Slurm: step " in (tmp_path / "batch.out").read_text()
    _after_restore(job)


def test_a_restartable_worker_on_a_lost_node_is_not_relaunched_there(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    def restartable(plan: dict[str, Any]) -> None:
        for unit in plan["units"]:
            if unit["name"] == LOST:
                unit["restart"].update(policy="on-failure", backoff_seconds=0.5)

    job, log_dir, record = _start(tmp_path, token, restartable)
    kill_node("node2", job)
    end = _end(job, log_dir)
    events = journal(log_dir)
    states = [e["state"] for e in events if e.get("unit") == LOST]
    assert states == ["waiting", "starting", "ready", "exited", "backoff", "failed"], states
    failed = unit_finals(events)[LOST]
    assert failed["reason"].startswith("launch failed: agg_1_node2: node node2 lost (slurmd at 127.0.0.3:17002 ")
    assert not (record / f"{LOST}.1.start").exists()  # never relaunched
    assert end["state"] == "failed"
    assert end["exit_code"] == 1
    _after_restore(job)


def test_a_stop_right_after_a_node_dies_still_ends_within_killwait(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    """The stop comes before the presence check could notice: the stop itself hurries the verdict."""
    job, log_dir, _ = _start(tmp_path, token)
    kill_node("node2", job)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True, timeout=30)
    end = _end(job, log_dir)
    events = journal(log_dir)
    stopping = next(e for e in events if e.get("unit") is None and e["state"] == "stopping")
    assert end["ts"] - stopping["ts"] <= KILL_WAIT + 5, end["ts"] - stopping["ts"]
    assert (end["state"], end["exit_code"]) == ("cancelled", 138), end
    finals = unit_finals(events)
    assert finals["agg_0_node1"]["state"] == "stopped"
    assert finals["service_registry"]["state"] == "stopped"
    lost = finals[LOST]
    assert lost["state"] == "stopped"
    assert lost["reason"].startswith("left to Slurm: node node2 lost (slurmd at 127.0.0.3:17002 "), lost
    assert f"left to Slurm: step {job}." in (tmp_path / "batch.out").read_text()
    _after_restore(job)
