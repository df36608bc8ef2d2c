"""Preflight and spare nodes on the dev cluster (docs/nodes.md).

The cluster's GPU query is `srtd-toy-gpus`, whose file gives node2 a foreign process on a GPU the
plan gives it.  With a spare (node3) the job replaces node2 before anything launches and
succeeds with nothing ever started on node2; without one it fails at once (exit 8) naming the
node and the check, before any unit launches.  A `--no-kill` job stopped with `srtd stop`
ends every step inside its teardown budget.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    CLUSTER_CONFIG,
    PROC,
    custom_job,
    final_job_event,
    journal,
    squeue_steps,
    srtd,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")

FOREIGN = {"gpus": 2, "nodes": {"node2": {"apps": [{"gpu": 0, "pid": 4242, "used_mib": 30000}]}}}
EVIDENCE = "pid 4242 holds 30000 MiB on GPU 0"


def _cluster(tmp_path: Path) -> Path:
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps(FOREIGN))
    path = tmp_path / "srtslurm.yaml"
    query = f"{sys.executable} -m srtd.toy.gpus --config {gpus}"
    path.write_text(CLUSTER_CONFIG.read_text() + f"gpu_query_command: {json.dumps(query)}\n")
    return path


def _recipe(tmp_path: Path, token: str, *, spares: int, nodes: str, benchmark: str) -> Path:
    text = custom_job("pf", token, tmp_path / "record", benchmark=benchmark)
    text = text.replace(
        "resources: {gpu_type: cpu, gpus_per_node: 2}",
        f"resources: {{gpu_type: cpu, gpus_per_node: 2, spare_nodes: {spares}}}\n"
        f'sbatch_directives: {{nodelist: "{nodes}"}}',
    )
    path = tmp_path / "pf.yaml"
    path.write_text(text)
    return path


def _bench(token: str, record: Path) -> str:
    argv = [sys.executable, str(PROC), "--record", str(record), "--token", token, "--exit-after", "2"]
    return f"{{type: custom, command: {json.dumps(' '.join(argv))}}}"


def _starts(record: Path) -> dict[str, str]:
    """unit -> the node its first attempt ran on (proc.py's records)."""
    out = {}
    for path in sorted(record.glob("*.start")):
        info = json.loads(path.read_text())
        out[path.name.split(".")[0]] = info["node"]
    return out


def _node_events(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["detail"]["node"]["node"], e["detail"]["node"]["what"]) for e in events if "node" in (e.get("detail") or {})
    ]


def _submit(tmp_path: Path, recipe: Path, cluster: Path, *wait: str) -> tuple[int, dict[str, Any]]:
    done = srtd("submit", str(recipe), "--cluster-config", str(cluster), "--json", *wait, cwd=tmp_path, timeout=300)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr
    return done.returncode, lines[0]


def test_a_node_failing_preflight_is_replaced_by_the_spare_and_never_used(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    record = tmp_path / "record"
    recipe = _recipe(tmp_path, token, spares=1, nodes="node1,node2,node3", benchmark=_bench(token, record))
    code, submitted = _submit(tmp_path, recipe, _cluster(tmp_path), "--wait")
    job, log_dir = submitted["job_id"], Path(submitted["log_dir"])
    events = journal(log_dir)
    assert code == 0, final_job_event(events)
    assert _node_events(events) == [
        ("node1", "preflight-passed"),
        ("node2", "preflight-failed"),
        ("node3", "preflight-passed"),
        ("node2", "replaced"),
    ]
    failed = next(e for e in events if (e.get("detail") or {}).get("node", {}).get("what") == "preflight-failed")
    assert failed["detail"]["node"]["check"] == "gpus-foreign"
    assert failed["detail"]["node"]["evidence"] == EVIDENCE
    replaced = next(e for e in events if (e.get("detail") or {}).get("node", {}).get("what") == "replaced")
    assert replaced["detail"]["node"]["spare"] == "node3"
    starts = _starts(record)
    assert "node2" not in starts.values(), starts  # nothing ever ran on the failing node
    assert "node3" in starts.values(), starts
    plan = json.loads((log_dir / "plan.json").read_text())
    assert all("node2" not in u["nodes"] for u in plan["units"])
    nothing_left(job)


def test_without_a_spare_the_job_fails_before_any_unit_launches(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    record = tmp_path / "record"
    recipe = _recipe(tmp_path, token, spares=0, nodes="node1,node2", benchmark=_bench(token, record))
    started = time.monotonic()
    code, submitted = _submit(tmp_path, recipe, _cluster(tmp_path), "--wait")
    job, log_dir = submitted["job_id"], Path(submitted["log_dir"])
    assert code == 8
    assert time.monotonic() - started < 120
    events = journal(log_dir)
    assert [e for e in events if e.get("unit") is not None] == []  # no unit ever launched
    final = final_job_event(events)
    assert final["state"] == "failed"
    assert final["reason"].startswith(
        f"node node2 failed preflight (gpus-foreign: {EVIDENCE}) and no spare node is left"
    )
    assert "set resources.spare_nodes" in final["reason"]
    assert not record.exists() or list(record.glob("*.start")) == []
    nothing_left(job)


def test_stopping_a_no_kill_job_ends_every_step_inside_its_budget(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    recipe = _recipe(tmp_path, token, spares=1, nodes="node1,node2,node3", benchmark="{type: manual}")
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps({"gpus": 2}))  # every node healthy
    cluster = tmp_path / "healthy.yaml"
    query = f"{sys.executable} -m srtd.toy.gpus --config {gpus}"
    cluster.write_text(CLUSTER_CONFIG.read_text() + f"gpu_query_command: {json.dumps(query)}\n")
    code, submitted = _submit(tmp_path, recipe, cluster)
    assert code == 0
    job, log_dir = submitted["job_id"], Path(submitted["log_dir"])
    assert "#SBATCH --no-kill\n" in (log_dir / "sbatch.sh").read_text()

    def running() -> bool:
        try:
            return any(e.get("unit") is None and e["state"] == "running" for e in journal(log_dir))
        except (OSError, ValueError):
            return False

    wait_for("the job to be running", running, timeout=180)
    assert squeue_steps(job)  # its steps run
    plan = json.loads((log_dir / "plan.json").read_text())
    budget = plan["teardown"]["total_seconds"]
    stopped = time.monotonic()
    done = srtd("stop", job, "--wait", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    wait_for("every step to end", lambda: not squeue_steps(job), timeout=budget + 30)
    assert time.monotonic() - stopped < budget + 30
    assert final_job_event(journal(log_dir))["state"] == "cancelled"
    nothing_left(job)
