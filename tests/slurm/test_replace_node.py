"""A worker node dies mid-benchmark under a job that holds a spare (docs/nodes.md).

Two worker nodes (node1, node2) and a spare (node3), a static router holding node2's
address, a running benchmark; node2's slurmd, slurmstepd and tasks are SIGKILLed while the
benchmark runs.  The job must move node2's worker to node3, restart the router with the
new address, run the benchmark again once both are ready, and exit 0; nothing is launched
on node2 again, and no step is left in squeue afterwards.

TEMPORARY (until h-nodepre's spares merge): the spare is given by editing the saved plan
(`"spares": ["node3"]`) and the job is submitted with `--no-kill` by hand; with
`resources.spare_nodes: 1` in the recipe both come from `srtd plan` / `srtd submit`.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
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
    wait_for,
)
from tests.slurm.node_loss import kill_node, mark_down, restore
from tests.slurm.test_lost_node import job_phase

pytestmark = pytest.mark.usefixtures("slurm")

MOVED = "agg_1_node2"
BENCH_SECONDS = 20


@pytest.fixture
def cluster_restored() -> Iterator[None]:
    yield
    restore()


def with_spare_and_router(plan: dict[str, Any]) -> None:
    """The spare node3, and a static router on node1 handed node2's worker address."""
    plan["spares"] = ["node3"]
    registry = next(u for u in plan["units"] if u["name"] == "service_registry")
    router = copy.deepcopy(registry)
    router.update(
        name="router",
        argv=[*registry["argv"], "--worker", "http://node2:30000"],
        log=registry["log"].replace("registry", "router"),
        after=[{"unit": MOVED, "condition": "ready"}],
        tier=0,
    )
    plan["units"].insert(3, router)
    bench = next(u for u in plan["units"] if u["name"] == "benchmark")
    bench["after"].append({"unit": "router", "condition": "ready"})
    for unit in plan["units"]:
        unit["terminate_timeout"] = 3.0
    plan.pop("srun_lines", None)


def _start(record: Path, name: str) -> dict[str, Any] | None:
    path = record / f"{name}.start"
    return json.loads(path.read_text()) if path.exists() else None


def test_a_lost_worker_node_is_replaced_by_the_spare_and_the_benchmark_completes(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    record = tmp_path / "record"
    log_dir = tmp_path / "logs"
    bench = f"echo started >> {tmp_path}/bench.runs; sleep {BENCH_SECONDS}; echo finished >> {tmp_path}/bench.runs"
    recipe = tmp_path / "spare.yaml"
    recipe.write_text(custom_job("spare", token, record, benchmark=f"{{type: custom, command: {json.dumps(bench)}}}"))
    plan = plan_job(recipe, tmp_path, "node[1-3]", log_dir, with_spare_and_router)
    job = sbatch(run_script(plan, 3), tmp_path, "--nodelist=node[1-3]", "--no-requeue", "--no-kill")

    runs = tmp_path / "bench.runs"
    wait_for("the benchmark to run", runs.exists, timeout=120)
    time.sleep(3)
    killed = kill_node("node2", job)
    at = time.time()
    assert killed["tasks"], killed

    def replaced() -> bool:
        return any((e.get("detail") or {}).get("node", {}).get("what") == "replaced" for e in journal(log_dir))

    def ended() -> bool:
        return final_job_event(journal(log_dir))["state"] in ("failed", "succeeded", "cancelled")

    # Slurm declaring node2 down (SlurmdTimeout, brought forward) while the job runs on: with
    # --no-kill the allocation stays, and no srun of the job waits on node2
    wait_for("the replacement", lambda: replaced() or ended(), timeout=90)
    mark_down("node2")

    wait_for(f"job {job} to end", ended, timeout=BENCH_SECONDS * 2 + 90)
    events = journal(log_dir)
    end = final_job_event(events)
    assert (end["state"], end["exit_code"]) == ("succeeded", 0), end

    facts = [e["detail"]["node"] for e in events if e.get("unit") is None and "node" in (e.get("detail") or {})]
    # preflight first: every node that carries units, and the spare, passed before anything launched
    checked = sorted(n["node"] for n in facts if n["what"] == "preflight-passed")
    assert checked == ["node1", "node2", "node3"]
    nodes = [n for n in facts if not n["what"].startswith("preflight-")]
    assert [(n["node"], n["what"], n["spare"], n["units"]) for n in nodes] == [
        ("node2", "lost", "node3", [MOVED]),
        ("node2", "replaced", "node3", [MOVED]),
    ]
    assert nodes[0]["evidence"].startswith("node node2 lost (slurmd at ")
    moved = _start(record, f"{MOVED}.1")
    assert moved is not None
    assert moved["node"] == "node3"
    router = _start(record, "router.1")
    assert router is not None
    assert router["argv"][-2:] == ["--worker", "http://node3:30000"]
    assert _start(record, "agg_0_node1.1") is None  # kept
    assert _start(record, "service_registry.1") is None
    # nothing launched on node2 after it was lost
    for path in record.glob("*.start"):
        info = json.loads(path.read_text())
        assert not (info["node"] == "node2" and info["t"] > at), info
    assert runs.read_text().splitlines() == ["started", "started", "finished"]
    bench_events = [e["state"] for e in events if e.get("unit") == "benchmark"]
    assert bench_events[-1] == "stopped"
    assert bench_events.count("starting") == 2

    # srtd has ended; the step it left on node2 goes once Slurm declares the node down
    wait_for(f"job {job}'s batch script to exit", lambda: job_phase(job) in ("", "COMPLETING"), timeout=60)
    mark_down("node2")
    wait_for(f"job {job} to leave squeue", lambda: not job_listed(job), timeout=60)
    restore()
    assert squeue_steps(job) == {}
