"""`srtd ps`, `attach`, `restart`, `tail` and `stop` on a job of the dev cluster, as for a local job."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    CLUSTER_CONFIG,
    custom_job,
    final_job_event,
    journal,
    squeue_steps,
    srtd,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")


def snapshot(job: str, cwd: Path) -> dict[str, Any]:
    done = srtd("attach", job, "--once", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def units_of(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    units = snap["units"]
    return {u["name"]: u for u in units} if isinstance(units, list) else units


def test_attach_and_its_verbs_work_on_a_slurm_job(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    recipe = tmp_path / "attach.yaml"
    recipe.write_text(custom_job("attach", token, tmp_path / "record"))  # a manual benchmark: it serves until stopped
    done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout.splitlines()[0])
    job, log_dir = submitted["job_id"], Path(submitted["log_dir"])

    def running() -> bool:
        try:
            return any(e.get("unit") is None and e["state"] == "running" for e in journal(log_dir))
        except (OSError, ValueError):
            return False

    wait_for("the job to be running", running, timeout=180)

    # ps lists it under its Slurm job id, with its socket
    done = srtd("ps", "--json", cwd=tmp_path)
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    mine = [j for j in listed if j["job_id"] == job]
    assert len(mine) == 1, listed
    assert (mine[0]["state"], Path(mine[0]["log_dir"])) == ("running", log_dir)
    assert Path(mine[0]["socket"]).is_socket()

    # the snapshot names each unit's Slurm step, and equals what squeue says
    units = units_of(snapshot(job, tmp_path))
    workers = sorted(n for n in units if n.startswith("agg_"))
    assert len(workers) == 2
    steps = squeue_steps(job)
    for name, unit in units.items():
        assert unit["state"] == "ready", (name, unit)
        assert unit["step"] is not None, (name, unit)
        assert unit["step"].startswith(f"{job}."), (name, unit)
        assert steps[unit["step"]] == name

    # restart one worker: it comes back as step <name>_r1, ready; the other is untouched
    target, other = workers
    before = units[other]["step"]
    done = srtd("restart", job, target, cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    def restarted() -> dict[str, Any] | None:
        unit = units_of(snapshot(job, tmp_path))[target]
        return unit if unit["restarts"] == 1 and unit["state"] == "ready" else None

    again = wait_for(f"{target} ready again", restarted, timeout=60)
    assert squeue_steps(job)[again["step"]] == f"{target}_r1"
    after = units_of(snapshot(job, tmp_path))[other]
    assert (after["step"], after["restarts"], after["state"]) == (before, 0, "ready")
    reasons = [e.get("reason") for e in journal(log_dir) if e.get("unit") == target and e["state"] == "stopping"]
    assert reasons == ["restart requested"]

    # tail reads the unit's log through the socket
    done = srtd("tail", job, target, "-n", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("ready") for line in done.stdout.splitlines()), done.stdout

    # stop: the graceful tiered teardown; the job ends cancelled and leaves nothing
    done = srtd("stop", job, "--wait", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    final = final_job_event(journal(log_dir))
    assert final["state"] == "cancelled"
    assert not Path(mine[0]["socket"]).exists()
    nothing_left(job)
