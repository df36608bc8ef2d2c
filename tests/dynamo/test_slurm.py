"""The aggregated Dynamo stack on the dev Slurm cluster, through `srtd submit --wait`.

etcd runs on one node, the two mocker workers on two others, the frontend and
aiperf on the head; the frontend's gate counts both registrations.  The `dynamo`
nox session brings the dev cluster up (scripts/slurm-dev-cluster) before the tests.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.command import SRTD, reap
from tests.dynamo.stack import REPO, Stack, in_session
from tests.supervisor.helpers import assert_no_leftovers, check_journal, wait_for

pytestmark = [in_session, pytest.mark.slow]

RECIPE = REPO / "recipes" / "slurm-dev" / "dynamo-agg.yaml"
CLUSTER = REPO / "scripts" / "slurm-dev-cluster"
CLUSTER_CONFIG = REPO / "scripts" / "slurm-dev.srtslurm.yaml"


def squeue_lists(job: str) -> bool:
    done = subprocess.run(["squeue", "--noheader", f"--jobs={job}"], capture_output=True, text=True, check=False)
    return bool(done.stdout.strip())


def test_the_agg_recipe_runs_on_the_slurm_dev_cluster(tmp_path: Path, stack: Stack) -> None:
    status = subprocess.run([str(CLUSTER), "status"], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        pytest.fail(f"the dev Slurm cluster is not up: {status.stdout.strip()} {status.stderr.strip()}")
    (tmp_path / "home").mkdir()
    argv = [*SRTD, "submit", "--wait", "--json", str(RECIPE)]
    argv += ["--cluster-config", str(CLUSTER_CONFIG)]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=stack.env(tmp_path / "home"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        first = proc.stdout.readline() if proc.stdout else ""
        submitted = json.loads(first)
        job, log_dir = submitted["job_id"], Path(submitted["log_dir"])
        if not log_dir.is_absolute():
            log_dir = tmp_path / log_dir
        seen = wait_for(log_dir, lambda es: any(e.unit == "benchmark" and e.state == "starting" for e in es), 240)
        plan = json.loads((log_dir / "plan.json").read_text())
        # Slurm picks the allocation; the recipe says etcd gets a node of its own and
        # each worker another, and the frontend shares the head with a worker.
        nodes = {u["name"]: u["nodes"] for u in plan["units"]}
        workers = sorted(n for u in plan["units"] if u["kind"] == "worker" for n in u["nodes"])
        assert len(plan["allocation"]) == 3
        assert len(set(workers)) == 2
        assert nodes["service_etcd"][0] not in workers
        assert nodes["frontend_0"][0] in workers
        # The gate passed with both workers registered: the frontend's /health lists
        # one generate endpoint per mocker, asked at the head node's Slurm address.
        frontend = plan["addresses"][nodes["frontend_0"][0]]
        health = httpx.get(f"http://{frontend}:8000/health", timeout=10.0).json()
        generate = [i for i in health["instances"] if i["endpoint"] == "generate"]
        assert [i["component"] for i in generate] == ["backend", "backend"], health
        assert any(e.unit == "frontend_0" and e.state == "ready" for e in seen)
        out, err = proc.communicate(timeout=300)
    finally:
        reap(proc)
    assert proc.returncode == 0, f"{out}\n{err}"
    final = json.loads(out.strip().splitlines()[-1])
    assert (final["job_id"], final["state"], final["exit_code"]) == (job, "completed", 0)
    journal = check_journal(log_dir / "events.jsonl", [])
    assert journal[-1].state == "succeeded"
    result = json.loads((log_dir / "benchmark.json").read_text())
    assert (result["errors"], result["failures"]) == (0, [])
    assert not squeue_lists(job)
    assert_no_leftovers(str(log_dir))
