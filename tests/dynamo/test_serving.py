"""The recipes users run: the aggregated and the disaggregated Dynamo stack, end to end, with aiperf."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srtd.events import Event
from tests.dynamo.stack import AGG, DISAGG, Stack, in_session, start
from tests.supervisor.helpers import assert_no_leftovers, check_journal, wait_for

pytestmark = [in_session, pytest.mark.slow]


def index(journal: list[Event], unit: str, state: str) -> int:
    return next(i for i, e in enumerate(journal) if e.unit == unit and e.state == state)


def check_run(
    tmp_path: Path, stack: Stack, recipe: Path, service: list[str], workers: list[str], components: list[str]
) -> tuple[list[Event], dict[str, object]]:
    """Run RECIPE; the checks both recipes share.  The journal and benchmark.json."""
    log_dir = tmp_path / "logs"
    job = start(stack, recipe, tmp_path)
    try:
        wait_for(log_dir, lambda es: any(e.unit == "benchmark" and e.state == "starting" for e in es), 120)
        # The gate passed: the frontend's /health lists every worker's generate endpoint.
        assert [c for c, _ in job.generate_instances()] == components
    finally:
        out = job.finish()
    assert job.proc.returncode == 0, out
    journal = check_journal(log_dir / "events.jsonl", [])
    assert journal[-1].state == "succeeded"
    # the discovery plane is probed before any worker starts
    for svc in service:
        for worker in workers:
            assert index(journal, svc, "ready") < index(journal, worker, "starting")
    # the gate passes after every worker started, the benchmark after the gate
    for worker in workers:
        assert index(journal, worker, "starting") < index(journal, "frontend_0", "ready")
    assert index(journal, "frontend_0", "ready") < index(journal, "benchmark", "starting")
    # teardown: workers and frontend (tier 0) are down before the discovery plane (tier 2) is stopped
    first_infra_stop = min(index(journal, svc, "stopping") for svc in service)
    for unit in [*workers, "frontend_0"]:
        assert index(journal, unit, "stopped") < first_infra_stop
    for svc in service:
        assert journal[index(journal, svc, "stopped")].reason == "stopped"
        # a fresh data directory inside the log directory
        assert (log_dir / "services" / svc.removeprefix("service_") / "data").is_dir()
    result = json.loads((log_dir / "benchmark.json").read_text())
    assert result["errors"] == 0
    assert result["failures"] == []
    assert "TTFT p50 ms" in (log_dir / "benchmark.out").read_text()
    # the results table is on srtd's console too (`benchmark.stream_output`)
    assert any(line.startswith("benchmark | ") and "TTFT p50 ms" in line for line in out.splitlines())
    assert_no_leftovers(str(log_dir))
    return journal, result


def test_agg_recipe_etcd_frontend_two_mockers_aiperf(tmp_path: Path, stack: Stack) -> None:
    _, result = check_run(
        tmp_path, stack, AGG, ["service_etcd"], ["agg_0_node1", "agg_1_node1"], ["backend", "backend"]
    )
    levels = result["levels"]
    assert isinstance(levels, list)
    assert [(lv["concurrency"], lv["requests"], lv["errors"]) for lv in levels] == [(1, 20, 0), (4, 20, 0)]
    for level in (1, 4):
        assert (tmp_path / "logs" / "aiperf" / f"c{level}" / "profile_export_aiperf.json").exists()
    assert all(lv["ttft_p50_ms"] is not None for lv in levels)


def test_disagg_recipe_prefill_decode_over_nats(tmp_path: Path, stack: Stack) -> None:
    _, result = check_run(
        tmp_path,
        stack,
        DISAGG,
        ["service_etcd", "service_nats"],
        ["prefill_0_node1", "decode_0_node1"],
        ["backend", "prefill"],
    )
    assert (result["requests"], result["errors"]) == (20, 0)
    plan = json.loads((tmp_path / "logs" / "plan.json").read_text())
    workers = [u for u in plan["units"] if u["kind"] == "worker"]
    assert {u["env"]["DYN_EVENT_PLANE"] for u in workers} == {"nats"}
    assert {u["env"]["NATS_SERVER"] for u in workers} == {"nats://127.0.0.1:4222"}
