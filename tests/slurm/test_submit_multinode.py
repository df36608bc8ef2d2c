"""The whole Slurm path: `srtd submit --wait` of a multi-node recipe on the dev cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.slurm.conftest import (
    CLUSTER_CONFIG,
    PROC,
    custom_job,
    final_job_event,
    journal,
    proc_command,
    squeue_steps,
    srtd,
)

pytestmark = pytest.mark.usefixtures("slurm")


def recipe_text(token: str, record: Path, bench_code: int) -> str:
    sidecar = f"""\
  - name: sidecar
    command: {proc_command(token, record, "--host", "{node_ip}")}
    placement: {{node: workers}}
    readiness: {{log: {{pattern: "^ready"}}}}
"""
    bench = f"{sys.executable} {PROC} --record {record} --token {token} --exit-after 4 --code {bench_code}"
    return custom_job(
        "e2e",
        token,
        record,
        worker_args=("--host", "{host}", "--index", "{index}", "--crash-index", "1"),
        registry_args=("--host", "{node_ip}"),
        role_extra=", restart: {policy: on-failure, max_restarts: 2, backoff_seconds: 1}",
        services=sidecar,
        benchmark=f"{{type: custom, command: {json.dumps(bench)}}}",
    )


def test_a_multinode_recipe_runs_as_named_steps_on_its_planned_nodes(
    tmp_path: Path, token: str, nothing_left: object
) -> None:
    record = tmp_path / "record"
    recipe = tmp_path / "e2e.yaml"
    recipe.write_text(recipe_text(token, record, bench_code=7))
    seen_steps: set[str] = set()
    job_box: list[str] = []
    stop = threading.Event()

    def watch_squeue() -> None:
        # squeue --steps during the run, from another thread of the test (not of srtd)
        while not stop.is_set():
            done = subprocess.run(
                ["squeue", "--noheader", "--format=%i %j", f"--name=e2e-{token}"],
                capture_output=True,
                text=True,
                check=False,
            )
            for line in done.stdout.splitlines():
                job = line.split()[0]
                if job not in job_box:
                    job_box.append(job)
            for job in job_box:
                seen_steps.update(squeue_steps(job).values())
            time.sleep(0.3)

    watcher = threading.Thread(target=watch_squeue, daemon=True)
    watcher.start()
    try:
        done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--wait", "--json", cwd=tmp_path)
    finally:
        stop.set()
        watcher.join()
    assert done.returncode == 7, done.stdout + done.stderr  # the terminal unit's code
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 2  # the job as it was submitted, then its outcome
    submitted, job = lines
    assert "state" not in submitted
    assert submitted["job_id"] == job["job_id"]
    assert job["exit_code"] == 7
    assert job["name"] == f"e2e-{token}"
    assert job["variant"] is None
    log_dir = Path(job["log_dir"])
    assert log_dir == tmp_path / "outputs" / job["job_id"] / "logs"
    assert (log_dir / "recipe.yaml").read_text() == recipe.read_text()  # frozen copy
    assert (
        (log_dir / "sbatch.sh")
        .read_text()
        .rstrip()
        .endswith(
            f'run {tmp_path}/outputs/"${{SLURM_JOB_ID}}"/logs/recipe.yaml '
            f'--cluster-config {tmp_path}/outputs/"${{SLURM_JOB_ID}}"/logs/srtslurm.yaml'
        )
    )

    plan = json.loads((log_dir / "plan.json").read_text())
    planned = {u["name"]: u for u in plan["units"]}
    # Every process ran where it was planned, as the step named after its unit.
    starts = {p.name.removesuffix(".start"): json.loads(p.read_text()) for p in record.glob("*.start")}
    for name, unit in planned.items():
        if unit["kind"] == "benchmark":
            continue  # run by the custom benchmark's shell (bash -c on a host); its record still says its node
        first = starts[f"{name}.0"]
        assert first["node"] == unit["nodes"][0], name
        assert first["step_name"] == name
        assert first["step"].startswith(job["job_id"] + ".")
    assert starts["benchmark.0"]["node"] == planned["benchmark"]["nodes"][0]
    # Addresses are Slurm's NodeAddr (node K at 127.0.0.(K+1)), never a node name.
    for name, unit in planned.items():
        if f"{name}.0" in starts and unit["kind"] != "benchmark":
            node = unit["nodes"][0]
            assert starts[f"{name}.0"]["host"] == f"127.0.0.{int(node.removeprefix('node')) + 1}", name
    assert plan["addresses"]["node1"] == "127.0.0.2"
    # The crash-once worker came back as step <name>_r1 on the same node and was ready again.
    crasher = next(n for n, u in planned.items() if u["kind"] == "worker" and u["index"] == 1)
    again = starts[f"{crasher}.1"]
    assert again["step_name"] == f"{crasher}_r1"
    assert again["node"] == planned[crasher]["nodes"][0]
    events = journal(log_dir)
    ready_attempts = [e.get("attempt") for e in events if e.get("unit") == crasher and e["state"] == "ready"]
    assert ready_attempts == [0, 1]
    # squeue --steps showed the planned step names while the job ran.
    assert set(planned) | {f"{crasher}_r1"} <= seen_steps, sorted(seen_steps)
    end = final_job_event(events)
    assert end["state"] == "failed"
    assert end["exit_code"] == 7
    assert "terminal unit benchmark" in end["reason"]
    nothing_left(job["job_id"])  # type: ignore[operator]
    assert squeue_steps(job["job_id"]) == {}
