"""The node that holds the job's infrastructure dies mid-benchmark (docs/nodes.md).

srtd runs on the allocation's first node, which cannot be replaced, so the infra lives on
a node of its own: etcd with `placement.node: dedicated`, and the benchmark client
`dedicated` as well, which puts the reserved node at the back of the job's nodes (with
only infra reserved it would be the first; docs/topology.md).  On node[1-3] with
`resources.spare_nodes: 1`: node1 is the head (the worker, and a `registry` service that
srtd hands etcd's address through `ETCD_ENDPOINTS`), node2 the infra node (etcd, the
benchmark client), node3 the spare.  node2 is SIGKILLed while the benchmark runs.  etcd
and the benchmark must move to node3; the registry, which holds etcd's address, must be
restarted only once the moved etcd is ready again; the worker, whose launch line names no
lost node, keeps running; the benchmark runs again and completes; exit 0; nothing is
launched on node2 after the kill, and squeue is empty afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    final_job_event,
    journal,
    plan_job,
    proc_command,
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

NODES = "node[1-3]"


def infra_job(token: str, record: Path, bench: str) -> str:
    unit = proc_command(token, record)
    return f"""\
schema: 2
name: infra-{token}
model: {{path: /models/none, container: none, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 2, spare_nodes: 1}}
engine:
  type: custom
  command: {unit}
  health:
    log: {{pattern: "^ready"}}
    timeout_seconds: 60
roles:
  agg: {{nodes: 1, workers: 1, gpus: 2}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
services:
  - name: etcd
    type: etcd
    command: {unit}
    placement: {{node: dedicated}}
    readiness: {{log: {{pattern: "^ready"}}}}
  - name: registry
    command: {unit}
    start: before_workers
    placement: {{node: head}}
    readiness: {{log: {{pattern: "^ready"}}}}
benchmark: {{type: custom, command: {json.dumps(bench)}, placement: {{node: dedicated}}}}
"""


def short_stops(plan: dict[str, Any]) -> None:
    for unit in plan["units"]:
        unit["terminate_timeout"] = 3.0


def _first(events: list[dict[str, Any]], unit: str, state: str, attempt: int) -> float:
    return next(
        e["ts"] for e in events if e.get("unit") == unit and e["state"] == state and e.get("attempt") == attempt
    )


def test_a_lost_infra_node_moves_etcd_to_the_spare_and_restarts_what_holds_its_address(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    record = tmp_path / "record"
    log_dir = tmp_path / "logs"
    runs = tmp_path / "bench.runs"
    bench = recorded_benchmark(runs)
    recipe = tmp_path / "infra.yaml"
    recipe.write_text(infra_job(token, record, bench))
    plan_path = plan_job(recipe, tmp_path, NODES, log_dir, short_stops)
    plan = json.loads(plan_path.read_text())
    assert plan["spares"] == ["node3"]
    assert (plan["nodes"]["head"], plan["nodes"]["infra"], plan["nodes"]["benchmark"]) == (
        ["node1"],
        ["node2"],
        ["node2"],
    )
    units = {u["name"]: u for u in plan["units"]}
    assert units["service_etcd"]["nodes"] == ["node2"]
    assert units["service_registry"]["nodes"] == ["node1"]
    assert units["service_registry"]["env"]["ETCD_ENDPOINTS"] == "http://node2:2379"
    script = run_script(plan_path, 3, header=sbatch_header(recipe, tmp_path, NODES, log_dir))
    assert "#SBATCH --no-kill" in script.splitlines()
    job = sbatch(script, tmp_path, f"--nodelist={NODES}", "--no-requeue")

    at = lose_mid_benchmark("node2", job, runs, log_dir, BENCH_SECONDS)
    events = journal(log_dir)
    end = final_job_event(events)
    assert (end["state"], end["exit_code"]) == ("succeeded", 0), end

    nodes = node_events(events, ["node1", "node2", "node3"])
    moved = ["benchmark", "service_etcd"]
    facts = [e["detail"]["node"] for e in nodes]
    assert [(n["node"], n["what"], n["spare"], sorted(n["units"])) for n in facts] == [
        ("node2", "lost", "node3", moved),
        ("node2", "replaced", "node3", moved),
    ]
    assert nodes[0]["reason"].endswith("; service_registry restart with its address"), nodes[0]["reason"]

    etcd = started(record, "service_etcd.1")
    assert etcd is not None
    assert etcd["node"] == "node3"
    registry = started(record, "service_registry.1")
    assert registry is not None
    assert registry["node"] == "node1"
    # the registry came back only once the moved etcd was ready again
    etcd_ready = _first(events, "service_etcd", "ready", 1)
    assert _first(events, "service_registry", "starting", 1) >= etcd_ready
    assert registry["t"] >= etcd_ready
    # the benchmark moved with etcd, and ran again only once the job served again
    assert _first(events, "benchmark", "starting", 1) >= _first(events, "service_registry", "ready", 1)
    assert started(record, "agg_0_node1.1") is None  # kept: its launch line names no lost node
    nothing_on("node2", record, at)  # nothing launched on node2 after it was lost
    benchmark_ran_again(events, runs)
    no_step_left("node2", job)
