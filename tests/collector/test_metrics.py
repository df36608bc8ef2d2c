"""`GET /metrics`: Prometheus' own parser reads it, and it carries the database's counts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from srtd.collector import Store, Tokens
from tests.collector.conftest import READ, WRITE, client_for
from tests.collector.test_pages import put

pytestmark = pytest.mark.anyio


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def journal(job_id: str) -> list[dict[str, Any]]:
    lost = {"node": {"node": "n2", "what": "lost", "spare": "n9", "units": ["w"], "check": None, "evidence": None}}
    return [
        {"seq": 1, "ts": 100.0, "state": "starting", "detail": {"job": "j", "job_id": job_id}},
        {"seq": 2, "ts": 100.5, "unit": "w", "state": "starting", "attempt": 0},
        {"seq": 3, "ts": 101.0, "unit": "w", "state": "exited", "exit_code": 1, "attempt": 0},
        {"seq": 4, "ts": 101.5, "unit": "w", "state": "starting", "attempt": 1},
        {"seq": 5, "ts": 102.0, "state": "starting", "reason": "node n2 lost", "detail": lost},
        {"seq": 6, "ts": 102.5, "unit": "w", "state": "starting", "attempt": 2},
        {"seq": 7, "ts": 104.0, "unit": "w", "state": "ready", "detail": {"seconds": 1.5}},
        {"seq": 8, "ts": 104.25, "state": "running"},
    ]


async def test_metrics_parse_and_carry_the_jobs_by_status_ready_restarts_losses_and_throughput(
    api: httpx.AsyncClient,
) -> None:
    for i in range(3):
        results = {"output_tokens_per_s": 100.0 * (i + 1), "tpot_ms": {"p50": 10.0}, "concurrency": 4}
        await api.put(
            f"/api/jobs/done-{i}", json=put("completed", exit_code=0, benchmark_results=results, metadata={"gpus": 2})
        )
    await api.put("/api/jobs/bad", json=put("failed", exit_code=1))
    await api.put("/api/jobs/run", json=put("workers"))
    await api.post("/api/srtd/jobs/run/journal", json={"events": journal("run")})
    stopped = [
        {"seq": 1, "ts": 1.0, "state": "starting"},
        {"seq": 2, "ts": 2.0, "state": "cancelled", "exit_code": 143},
    ]
    await api.put("/api/jobs/stop", json=put("failed", exit_code=143))
    await api.post("/api/srtd/jobs/stop/journal", json={"events": stopped})
    odd = {"job_id": "odd", "job_name": 'odd"\\name\né', "submitted_at": "2026-11-30T09:00:00+00:00"}
    assert (await api.post("/api/jobs", json=odd)).status_code == 201
    await api.put("/api/jobs/odd", json=put("benchmark"))
    answer = await api.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = samples(answer.text)
    by_status = {labels["status"]: value for labels, value in got["srtd_collector_jobs"]}
    assert by_status == {"submitted": 0, "starting": 0, "workers": 1, "frontend": 0, "benchmark": 1, "completed": 3,
                         "failed": 1, "timeout": 0, "cancelled": 1}  # fmt: skip
    assert sum(by_status.values()) == len((await api.get("/api/jobs")).json()["jobs"])
    ready = {labels["job_id"]: value for labels, value in got["srtd_collector_job_ready_seconds"]}
    assert ready == {"run": 4.25}
    restarts = {labels["job_id"]: value for labels, value in got["srtd_collector_job_unit_restarts"]}
    losses = {labels["job_id"]: value for labels, value in got["srtd_collector_job_node_losses"]}
    assert (restarts["run"], losses["run"], restarts["done-0"], losses["done-0"]) == (2, 1, 0, 0)
    names = {labels["job_id"]: labels["job_name"] for labels, _ in got["srtd_collector_job_unit_restarts"]}
    assert names["odd"] == 'odd"\\name\né'  # a quote, a backslash, a newline read back as they were
    per_gpu = {
        (lbl["job_id"], lbl["concurrency"]): v
        for lbl, v in got["srtd_collector_point_output_tokens_per_second_per_gpu"]
    }
    assert per_gpu == {("done-0", "4"): 50.0, ("done-1", "4"): 100.0, ("done-2", "4"): 150.0}
    tok_s = {lbl["job_id"]: v for lbl, v in got["srtd_collector_point_output_tokens_per_second"]}
    assert tok_s == {"done-0": 100.0, "done-1": 200.0, "done-2": 300.0}


async def test_metrics_follow_the_apis_token_rules(store: Store) -> None:
    async with client_for(store, Tokens(write=WRITE, read=READ), None) as anonymous:
        refused = await anonymous.get("/metrics")
        assert (refused.status_code, refused.headers["www-authenticate"]) == (401, "Bearer")
    async with client_for(store, Tokens(write=WRITE, read=READ), READ) as reader:
        assert (await reader.get("/metrics")).status_code == 200
    async with client_for(store, Tokens(write=WRITE), None) as open_reads:  # no read token: reads are open
        assert (await open_reads.get("/metrics")).status_code == 200
