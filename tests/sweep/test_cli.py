"""`srtd sweep` as a command, its Slurm tools stood in for (tests/sweep/fake_tools.py): the wiring
from recipes to jobs, the manifest, the final table, the exit code and a second run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.command import SRTD, run_srtd, srtd_env

TOOLS = Path(__file__).resolve().parent / "fake_tools.py"
RECIPE = """\
schema: 2
name: wiring
sweep:
  mode: zip
  parameters:
    concurrency: [1, 2, 3]
    tag: [ok, broken, ok2]
model: {path: "hf:srtd/toy", container: toy, precision: bf16}
resources: {gpu_type: cpu, gpus_per_node: 1}
engine: toy
roles:
  agg: {nodes: 1, workers: 1, gpus: 1}
frontend: {type: toy-router, enable_multiple_frontends: false}
observability: {tachometer: {enabled: false}}
benchmark: {type: toy, num_requests: 4, concurrency: "{concurrency}", max_tokens: 8}
"""


def _tools(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sbatch", "scontrol", "squeue", "sacct"):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {TOOLS} {tool} "$@"\n')
        script.chmod(0o755)
    state = tmp_path / "slurm"
    state.mkdir()
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_DIR": str(state)}


def test_a_campaign_is_submitted_judged_reported_and_not_submitted_twice(tmp_path: Path) -> None:
    env = _tools(tmp_path)
    (tmp_path / "sweep.yaml").write_text(RECIPE)
    args = ("sweep", "sweep.yaml", "--max-running", "2", "--poll", "0.1")
    done = run_srtd(*args, "--json", cwd=tmp_path, env=env, drop=("SLURM_", "SRTD_"))
    assert done.returncode == 1, done.stderr  # one point did not measure
    final = json.loads(done.stdout.splitlines()[-1])
    assert final["final"] is True
    assert final["counts"] == {"measured": 2, "configuration": 1}
    broken = next(p for p in final["points"] if p["key"] == "wiring[concurrency=2,tag=broken]")
    assert broken["why"] == "agg_0 exited 2"  # the post-mortem's reason line
    jobs = json.loads((tmp_path / "slurm" / "jobs.json").read_text())
    assert sorted(jobs) == ["1000", "1001", "1002"]
    assert all("--hold" in j["args"] and "--no-requeue" in j["args"] and j["released"] for j in jobs.values())
    manifest = json.loads((tmp_path / "campaigns" / "sweep" / "campaign.json").read_text())
    assert sorted(manifest["points"]) == sorted(p["key"] for p in final["points"])

    again = run_srtd(*args, cwd=tmp_path, env=env, drop=("SLURM_", "SRTD_"))
    assert again.returncode == 1, again.stderr
    assert sorted(json.loads((tmp_path / "slurm" / "jobs.json").read_text())) == ["1000", "1001", "1002"]
    assert "2 points from 2 measured jobs" in again.stdout
    assert "not measured: wiring[concurrency=2,tag=broken]: configuration: agg_0 exited 2 (job 1001, " in again.stdout
    assert f"campaign {Path('campaigns') / 'sweep'}: 2 of 3 measured" in again.stdout


def test_ctrl_c_leaves_the_jobs_queued_and_the_next_run_follows_them(tmp_path: Path) -> None:
    env = _tools(tmp_path)
    (tmp_path / "sweep.yaml").write_text(RECIPE)
    (tmp_path / "slurm" / "hold-running").touch()
    argv = [*SRTD, "sweep", "sweep.yaml", "--max-running", "2", "--poll", "0.1", "--json"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=srtd_env(env, drop=("SLURM_", "SRTD_")), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    jobs = tmp_path / "slurm" / "jobs.json"
    deadline = time.monotonic() + 60
    while not (jobs.exists() and len(json.loads(jobs.read_text())) == 2):
        assert time.monotonic() < deadline, "two jobs were not submitted"
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode().splitlines() == [
        "srtd sweep: 2 jobs left in the queue (`srtd sweep --cancel` ends them)",
        "srtd: interrupted",
    ]
    manifest = json.loads((tmp_path / "campaigns" / "sweep" / "campaign.json").read_text())
    queued = [j["job_id"] for p in manifest["points"].values() for j in p["jobs"] if j["outcome"] is None]
    assert queued == ["1000", "1001"]
    (tmp_path / "slurm" / "hold-running").unlink()
    done = run_srtd("sweep", "sweep.yaml", "--max-running", "2", "--poll", "0.1", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    assert sorted(json.loads(jobs.read_text())) == ["1000", "1001", "1002"]  # the two followed, the third submitted
    assert json.loads(done.stdout.splitlines()[-1])["counts"] == {"measured": 2, "configuration": 1}


def test_the_campaign_is_one_sweep_in_the_collector(tmp_path: Path) -> None:
    from tests.collector.helpers import collector

    env = _tools(tmp_path)
    with collector(tmp_path / "c.db") as running:
        (tmp_path / "sweep.yaml").write_text(RECIPE + f"reporting: {{status: {{endpoint: {running.url!r}}}}}\n")
        done = run_srtd(
            "sweep", "sweep.yaml", "--campaign", "night-1", "--poll", "0.1", "--json", cwd=tmp_path, env=env
        )
        assert done.returncode == 1, done.stderr
        for job_id, variant in (("1000", "concurrency=1,tag=ok"), ("1002", "concurrency=3,tag=ok2")):
            job = httpx.get(f"{running.url}/api/jobs/{job_id}", timeout=5).json()
            assert job["metadata"]["sweep"] == "night-1"
            assert job["metadata"]["variant"] == variant
        page = httpx.get(f"{running.url}/sweeps/night-1", timeout=5)
        assert page.status_code == 200
        assert "concurrency=3,tag=ok2" in page.text
