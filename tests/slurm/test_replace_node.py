"""A worker node dies mid-benchmark under a job that holds a spare (docs/nodes.md).

Two worker nodes (node1, node2) and a spare (node3), a static router holding node2's
address, a running benchmark; node2's slurmd, slurmstepd and tasks are SIGKILLed while the
benchmark runs.  The job must move node2's worker to node3, restart the router with the
new address, run the benchmark again once both are ready, and exit 0; nothing is launched
on node2 again, and no step is left in squeue afterwards.

The spare comes from the recipe (`resources.spare_nodes: 1`): `srtd plan` holds node3 back
and srtd's own `#SBATCH` lines (`srtd plan --sbatch`) ask for three nodes and `--no-kill`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    custom_job,
    final_job_event,
    journal,
    plan_job,
    run_script,
    sbatch,
    sbatch_header,
    started,
)
from tests.slurm.replacing import (
    BENCH_SECONDS,
    benchmark_ran_again,
    lose_mid_benchmark,
    no_step_left,
    node_events,
    nothing_on,
    recorded_benchmark,
)

pytestmark = pytest.mark.usefixtures("slurm")

MOVED = "agg_1_node2"


def with_router(plan: dict[str, Any]) -> None:
    """A static router on node1 handed node2's worker address.

    A plan edit, because a recipe cannot write it: a service's placeholders name the head,
    the infra node, its own pool or its own worker, never one worker on another node.
    """
    assert plan["spares"] == ["node3"]  # from resources.spare_nodes: 1
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


def submit_with_spare(work: Path, name: str, token: str, bench: str) -> str:
    """The job on node[1-3] with `resources.spare_nodes: 1`, submitted with srtd's own `#SBATCH` lines."""
    recipe = work / "spare.yaml"
    text = custom_job(name, token, work / "record", benchmark=f"{{type: custom, command: {json.dumps(bench)}}}")
    recipe.write_text(text.replace("gpus_per_node: 2}", "gpus_per_node: 2, spare_nodes: 1}"))
    log_dir = work / "logs"
    plan = plan_job(recipe, work, "node[1-3]", log_dir, with_router)
    assert json.loads(plan.read_text())["spares"] == ["node3"]
    script = run_script(plan, 3, header=sbatch_header(recipe, work, "node[1-3]", log_dir))
    assert "#SBATCH --no-kill" in script.splitlines()
    assert "#SBATCH --nodes=3" in script.splitlines()
    return sbatch(script, work, "--nodelist=node[1-3]", "--no-requeue")


def test_a_lost_worker_node_is_replaced_by_the_spare_and_the_benchmark_completes(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    record = tmp_path / "record"
    log_dir = tmp_path / "logs"
    runs = tmp_path / "bench.runs"
    job = submit_with_spare(tmp_path, "spare", token, recorded_benchmark(runs))

    at = lose_mid_benchmark("node2", job, runs, log_dir, BENCH_SECONDS)
    events = journal(log_dir)
    end = final_job_event(events)
    assert (end["state"], end["exit_code"]) == ("succeeded", 0), end

    # preflight first: every node that carries units, and the spare, passed before anything launched
    nodes = [e["detail"]["node"] for e in node_events(events, ["node1", "node2", "node3"])]
    assert [(n["node"], n["what"], n["spare"], n["units"]) for n in nodes] == [
        ("node2", "lost", "node3", [MOVED]),
        ("node2", "replaced", "node3", [MOVED]),
    ]
    assert nodes[0]["evidence"].startswith("node node2 lost (slurmd at ")
    moved = started(record, f"{MOVED}.1")
    assert moved is not None
    assert moved["node"] == "node3"
    router = started(record, "router.1")
    assert router is not None
    assert router["argv"][-2:] == ["--worker", "http://node3:30000"]
    assert started(record, "agg_0_node1.1") is None  # kept
    assert started(record, "service_registry.1") is None
    nothing_on("node2", record, at)  # nothing launched on node2 after it was lost
    benchmark_ran_again(events, runs)
    no_step_left("node2", job)
