"""Attach round trip on the dev Slurm cluster: on the job's node vs from the login node through the relay.

One srtd job (a registry service and two workers that serve until stopped) is
submitted with `srtd submit`.  While it runs, each sample is one round trip, from
the client's first move to the first snapshot in its hands:

- **on the node**: connect to the socket in the batch host's runtime directory, read
  the greeting, send `snapshot`, read the reply (what `srtd attach --once` does there);
- **relay**: the same through `connect(job id)` from a process whose runtime directory
  is its own, which asks Slurm where the job runs (`squeue`), starts the relay step
  (`srun --jobid ... srtd relay`), and speaks through it; then the client leaves,
  and the next sample starts once srun (and its step) has ended;
- **CLI**: `srtd attach JOB --once --json` end to end (interpreter start included),
  both ways.

Every node of the dev cluster is this machine, so "on the node" is the same code a
user on the batch host runs.  Needs the cluster up (`scripts/slurm-dev-cluster up 4`);
without it the result says so and measures nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from perf._common import REPO, summary_ms
from tests.command import run_srtd

CLUSTER_CONFIG = REPO / "scripts" / "slurm-dev.srtslurm.yaml"
RECIPE = """\
schema: 2
name: perf-relay
model: {{path: /models/none, container: none, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 1}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
roles:
  agg: {{nodes: 2, workers: 2, gpus: 1}}
engine:
  type: custom
  command: [bash, -c, 'echo ready; exec sleep 3600']
  health: {{log: {{pattern: "^ready"}}, timeout_seconds: 60}}
services:
  - name: registry
    command: [bash, -c, 'echo ready; exec sleep 3600']
    start: infra
    placement: {{node: infra}}
    readiness: {{log: {{pattern: "^ready"}}}}
benchmark: {{type: manual}}
"""


def _cluster_up() -> str | None:
    script = str(REPO / "scripts" / "slurm-dev-cluster")
    done = subprocess.run([script, "status"], capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else f"the dev Slurm cluster is not up ({done.stdout.strip()})"


def _srtd(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_srtd(*args, cwd=cwd, env=env, drop=())


def _running(log_dir: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            lines = (log_dir / "events.jsonl").read_text().splitlines()
            if any(json.loads(x).get("unit") is None and json.loads(x)["state"] == "running" for x in lines):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the job of {log_dir} was not running within {timeout:g} s")


def _round_trips(target: str, n: int) -> list[float]:
    from srtd.attach import connect

    samples = []
    for _ in range(n):
        began = time.perf_counter()
        with connect(target) as conn:
            conn.request("snapshot")
            samples.append(time.perf_counter() - began)
    return samples


def _cli(target: str, n: int, env: dict[str, str], cwd: Path) -> list[float]:
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        done = _srtd("attach", target, "--once", "--json", env=env, cwd=cwd)
        samples.append(time.perf_counter() - began)
        if done.returncode != 0:
            raise RuntimeError(f"srtd attach {target}: {done.stderr.strip()}")
    return samples


def relay(quick: bool) -> dict[str, Any]:
    why = _cluster_up()
    if why is not None:
        return {"skipped": why}
    n, cli_n = (5, 2) if quick else (30, 8)
    with tempfile.TemporaryDirectory(prefix="perf-relay-") as tmp:
        work = Path(tmp)
        login_rt = work / "login-rt"
        env = {**os.environ, "SRTD_RUNTIME_DIR": str(login_rt)}
        (work / "relay.yaml").write_text(RECIPE.format())
        recipe = str(work / "relay.yaml")
        done = _srtd("submit", recipe, "--cluster-config", str(CLUSTER_CONFIG), "--json", env=env, cwd=work)
        if done.returncode != 0:
            raise RuntimeError(f"srtd submit: {done.stderr.strip()}")
        job = json.loads(done.stdout)
        job_id, log_dir = job["job_id"], Path(job["log_dir"])
        try:
            _running(log_dir)
            socket = json.loads((log_dir / "attach.json").read_text())["socket"]
            os.environ["SRTD_RUNTIME_DIR"] = str(login_rt)  # this process is the login node now
            node = _round_trips(socket, n)
            through = _round_trips(job_id, n)
            cli_node = _cli(socket, cli_n, env, work)
            cli_relay = _cli(job_id, cli_n, env, work)
        finally:
            _srtd("stop", job_id, "--wait", env=env, cwd=work)
            subprocess.run(["scancel", job_id], check=False)
    return {
        "job": job_id,
        "node": summary_ms(node),
        "relay": summary_ms(through),
        "cli_node": summary_ms(cli_node),
        "cli_relay": summary_ms(cli_relay),
    }
