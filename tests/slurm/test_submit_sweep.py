"""`srtd submit` of a sweep: one job per point, `--wait` exits with the worst job exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.slurm.conftest import CLUSTER_CONFIG, srtd

pytestmark = pytest.mark.usefixtures("slurm")


def sweep_recipe(token: str) -> str:
    return f"""\
schema: 2
name: sweep-{token}
sweep:
  code: [0, 5]
model: {{path: /models/none, container: none, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 1}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
services:
  - name: idle
    command: [sleep, "3600", "{token}"]
benchmark:
  type: custom
  command: "echo code {{code}}; exit {{code}}"
"""


def test_dry_run_prints_one_script_per_sweep_point_and_submits_nothing(tmp_path: Path, token: str) -> None:
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(sweep_recipe(token))
    done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--dry-run", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    jobs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(j["job_id"], j["variant"]) for j in jobs] == [(None, "code=0"), (None, "code=5")]
    for job in jobs:
        assert job["log_dir"] == f"{tmp_path}/outputs/<job_id>/logs"
        assert (
            job["script"]
            .splitlines()[-1]
            .endswith(
                f'--variant {job["variant"]} --cluster-config {tmp_path}/outputs/"${{SLURM_JOB_ID}}"/logs/srtslurm.yaml'
            )
        )
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").iterdir())


def test_every_sweep_point_is_a_job_and_wait_returns_the_worst_code(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(sweep_recipe(token))
    done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--wait", "--json", cwd=tmp_path)
    assert done.returncode == 5, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # one line per job as it is submitted, then one per job with its outcome
    assert [("state" in j) for j in lines] == [False, False, True, True]
    assert [j["job_id"] for j in lines[:2]] == [j["job_id"] for j in lines[2:]]
    jobs = {j["variant"]: j for j in lines[2:]}
    assert set(jobs) == {"code=0", "code=5"}
    assert jobs["code=0"]["exit_code"] == 0
    assert jobs["code=5"]["exit_code"] == 5
    assert jobs["code=0"]["job_id"] != jobs["code=5"]["job_id"]
    for variant, job in jobs.items():
        log_dir = Path(job["log_dir"])
        assert (log_dir / "recipe.yaml").read_text() == recipe.read_text()
        assert f"--variant {variant}" in (log_dir / "sbatch.sh").read_text()
        assert (log_dir / "benchmark.out").read_text().startswith(f"code {variant[-1]}\n")
        nothing_left(job["job_id"])
