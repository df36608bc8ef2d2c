"""tok/s per W: the power manifest's windows ride with the results to the collector, which charts them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from srtd.collector import Store, Tokens, create_app
from srtd.collector._pages import ROUTES
from srtd.events import Event
from srtd.reporting import StatusReporter
from srtd.unit import PowerEndpoint, PowerSampling
from tests.collector.test_journal_feed import drive, make_plan
from tests.reporting.test_sender import Log

pytestmark = pytest.mark.anyio
TOKEN = "power-test-token"


def manifest(folder: Path) -> None:
    windows = [
        {"concurrency": 4, "benchmark_type": "aiperf", "mean_power_w": 500.0, "energy_j": 5000.0,
         "power_coverage_valid": True, "reasons": []},
        {"concurrency": 8, "benchmark_type": "aiperf", "mean_power_w": 800.0, "energy_j": 8000.0,
         "power_coverage_valid": True, "reasons": []},
        {"concurrency": 16, "benchmark_type": "aiperf", "mean_power_w": None, "energy_j": None,
         "power_coverage_valid": False, "reasons": ["sample_gap_exceeded"]},
    ]  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"status": "incomplete", "windows": windows, "samples": 9}))


async def test_the_final_results_carry_each_windows_power_and_the_sweep_charts_tok_s_per_w(
    store: Store, tmp_path: Path
) -> None:
    points = [
        {"concurrency": c, "output_tokens_per_s": tps, "tpot_ms": {"p50": 10.0}}
        for c, tps in ((4, 1000.0), (8, 1600.0), (16, 2000.0))
    ]
    (tmp_path / "benchmark.json").write_text(json.dumps({"format": 1, "points": points}))
    manifest(tmp_path / "power")
    power = PowerSampling(
        dir=str(tmp_path / "power"), endpoints=(PowerEndpoint(node="n", url="http://n:9400/metrics"),),
        metric="DCGM_FI_DEV_POWER_USAGE", index_label="gpu",
    )  # fmt: skip
    plan = replace(make_plan(tmp_path, variant="concurrency=4"), power=power)
    app = create_app(store, Tokens(write=TOKEN), ROUTES)
    reporter = StatusReporter(plan, transport=httpx.ASGITransport(app=app), environ={"TOK": TOKEN}, log=Log())
    reporter.final_wait = 5
    events = [
        Event(seq=1, ts=1.0, state="starting", detail={"job": "job", "job_id": "7"}),
        Event(seq=2, ts=2.0, state="succeeded", exit_code=0),
    ]
    await drive(reporter, events)
    job = store.job("7")
    assert job is not None
    assert job["benchmark_results"]["power"] == {
        "status": "incomplete",
        "windows": [
            {"concurrency": 4, "benchmark_type": "aiperf", "mean_power_w": 500.0, "energy_j": 5000.0, "covered": True},
            {"concurrency": 8, "benchmark_type": "aiperf", "mean_power_w": 800.0, "energy_j": 8000.0, "covered": True},
            {"concurrency": 16, "benchmark_type": "aiperf", "mean_power_w": None, "energy_j": None, "covered": False},
        ],
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c") as client:
        sweep = (await client.get("/sweeps/job")).text
        page = (await client.get("/jobs/7")).text
    chart = json.loads(sweep.split('id="chart-data">')[1].split("</script>")[0])
    assert [(p["concurrency"], p["tok_s_per_w"], p["power_w"]) for p in chart["points"]] == [
        (4, 2.0, 500.0),
        (8, 2.0, 800.0),
        (16, None, None),  # a window the samples did not cover has no power figure
    ]
    assert '<figure class="chart" data-chart="power"' in sweep
    assert '<th class="col-tok_s_per_w">tok/s per W</th>' in sweep
    assert '<th class="col-tok_s_per_w">tok/s per W</th>' in page  # the job page's results table too


async def test_without_power_there_is_no_power_column_or_chart(api: httpx.AsyncClient) -> None:
    results = {"output_tokens_per_s": 100.0, "tpot_ms": {"p50": 10.0}, "concurrency": 1}
    done = {"status": "completed", "updated_at": "2026-11-30T10:00:00+00:00", "benchmark_results": results,
            "metadata": {"variant": "concurrency=1"}}  # fmt: skip
    await api.post("/api/jobs", json={"job_id": "p1", "job_name": "nopower", "submitted_at": "2026-11-30T09:00:00"})
    await api.put("/api/jobs/p1", json=done)
    sweep = (await api.get("/sweeps/nopower")).text
    assert "tok/s per W" not in sweep
    assert 'data-chart="power"' not in sweep
