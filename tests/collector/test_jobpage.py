"""A job's page for people: results as a table, metadata as a list, the post-mortem, the timeline chart."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import httpx
import pytest

from tests.collector.test_pages import put

pytestmark = pytest.mark.anyio
EVIL = '<script>alert("x")</script>\'é✓'
LOST = {"node": "n2", "what": "lost", "spare": "n9"}  # a node event (docs/events.md): a journal note


def failed_journal(unit: str) -> list[dict[str, Any]]:
    postmortem = {
        "unit": unit,
        "reason": "exited with exit code 3 before it was ready",
        "exit_code": 3,
        "log": ["loading weights", f"error: {EVIL}", "x" * 5000],
    }
    return [
        {"seq": 1, "ts": 10.0, "state": "starting", "detail": {"job": "toy", "job_id": "f1", "units": ["etcd", unit]}},
        {"seq": 2, "ts": 10.1, "unit": "etcd", "state": "starting", "attempt": 0},
        {"seq": 3, "ts": 10.6, "unit": "etcd", "state": "ready", "detail": {"seconds": 0.5}},
        {"seq": 4, "ts": 10.7, "unit": unit, "state": "starting", "attempt": 0},
        {
            "seq": 5,
            "ts": 11.0,
            "state": "starting",
            "reason": "node n2 lost",
            "detail": {"node": LOST},
        },
        {"seq": 6, "ts": 11.5, "unit": unit, "state": "failed", "exit_code": 3, "reason": "exited 3"},
        {
            "seq": 7,
            "ts": 12.0,
            "state": "failed",
            "exit_code": 1,
            "detail": {"culprit": unit, "postmortem": postmortem},
        },
    ]


async def test_a_failed_job_shows_the_culprits_reason_and_last_log_lines_escaped(api: httpx.AsyncClient) -> None:
    unit = f"w{EVIL}"
    assert (await api.post("/api/srtd/jobs/f1/journal", json={"events": failed_journal(unit)})).status_code == 200
    await api.put("/api/jobs/f1", json=put("failed", exit_code=1))
    page = (await api.get("/jobs/f1")).text
    why = page.split('<section class="postmortem">')[1].split("</section>")[0]
    assert "<script>" not in page.split("</head>")[1]
    culprit = re.findall(
        r"failure culprit: <b>(.*?)</b>, exit code 3: exited with exit code 3 before it was ready", why
    )
    assert [unescape(c) for c in culprit] == [unit]
    tail = unescape(why.split('<pre class="log-tail">')[1].split("</pre>")[0]).splitlines()
    assert tail[:2] == ["loading weights", f"error: {EVIL}"]
    assert len(tail[2]) == 400  # a long line is cut to the page's bound
    assert "the last 3 lines of its log" in why


async def test_the_timeline_is_a_chart_of_units_states_and_the_critical_chain(api: httpx.AsyncClient) -> None:
    await api.post("/api/srtd/jobs/f1/journal", json={"events": failed_journal("w")})
    page = (await api.get("/jobs/f1")).text
    gantt = page.split('<div class="gantt"')[1]
    rows = re.findall(r'<div class="gantt-row( critical)?" data-unit="([^"]+)">', gantt)
    assert rows == [(" critical", "etcd"), ("", "w")]  # etcd's readiness is the last the job waited for
    etcd = gantt.split('data-unit="etcd"')[1].split("</svg>")[0]
    bars = re.findall(r'data-state="(\w+)" x="([\d.]+)" y="1" width="([\d.]+)"', etcd)
    assert [(s, float(x), float(w)) for s, x, w in bars] == [("starting", 50.0, 250.0), ("ready", 300.0, 700.0)]
    assert "<title>etcd: starting from 0.10 s to 0.60 s (0.50 s)</title>" in etcd  # hover shows the times
    notes = page.split('<table class="notes">')[1].split("</table>")[0]
    assert "node n2 lost" in notes  # an event kind this page does not know is a row, not an error
    assert json.loads(unescape(re.findall(r"<code>(.*?)</code>", notes)[0])) == {"node": LOST}


async def test_results_are_a_rounded_table_with_units_and_metadata_a_definition_list(api: httpx.AsyncClient) -> None:
    results = {
        "format": 1,
        "points": [
            {
                "concurrency": 4,
                "output_tokens_per_s": 1234.5678,
                "tpot_ms": {"p50": 12.3456},
                "ttft_ms": {"p50": 45.678},
            },
            {"concurrency": 8, "output_tokens_per_s": 2345.6789, "tpot_ms": {"p50": 20.0}, "ttft_ms": {"p50": 80.0}},
        ],
    }
    meta = {"gpus": 2, "resources": {"gpu_type": "h100", "nodes": 1}, "tags": ["a", "b"], "variant": "concurrency=4"}
    await api.put("/api/jobs/r1", json=put("completed", exit_code=0, benchmark_results=results, metadata=meta))
    page = (await api.get("/jobs/r1")).text
    table = page.split('<table class="results points">')[1].split("</table>")[0]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert headers[:5] == ["point", "conc.", "tok/s per GPU", "tok/s per user", "tok/s"]
    first = re.findall(r"<td[^>]*>([^<]*)</td>", table.split("<tbody>")[1].split("</tr>")[0])
    assert first[:6] == ["concurrency=4", "4", "617", "81", "1,235", "45.7"]
    metadata = page.split('<dl class="facts metadata">')[1].split("</dl>")[0]
    pairs = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", metadata)
    assert pairs == [("gpus", "2"), ("resources.gpu_type", "h100"), ("resources.nodes", "1"), ("tags", "a, b"),
                     ("variant", "concurrency=4")]  # fmt: skip
    assert "<pre>" not in page


async def test_results_that_are_no_points_are_a_list_and_a_cancelled_job_says_so(api: httpx.AsyncClient) -> None:
    await api.put(
        "/api/jobs/c1", json=put("failed", exit_code=143, benchmark_results={"note": "partial", "n": 3.14159})
    )
    events = [
        {"seq": 1, "ts": 1.0, "state": "starting", "detail": {"job": "c", "job_id": "c1"}},
        {"seq": 2, "ts": 2.0, "state": "cancelled", "exit_code": 143, "reason": "stopped by SIGTERM"},
    ]
    await api.post("/api/srtd/jobs/c1/journal", json={"events": events})
    page = (await api.get("/jobs/c1")).text
    results = page.split('<dl class="facts results">')[1].split("</dl>")[0]
    assert re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", results) == [("n", "3.14"), ("note", "partial")]
    status = page.split("<dt>status</dt><dd>")[1].split("</dd>")[0]
    assert 'data-status="cancelled"' in status
    assert "(reported as failed)" in status


async def test_a_cancelled_sweep_point_reads_cancelled_on_its_sweep_page(api: httpx.AsyncClient) -> None:
    point = put("failed", exit_code=143, metadata={"sweep": "sw", "variant": "concurrency=2"})
    await api.put("/api/jobs/s2", json=point)
    events = [
        {"seq": 1, "ts": 1.0, "state": "starting"},
        {"seq": 2, "ts": 2.0, "state": "cancelled", "exit_code": 143, "reason": "stopped by SIGTERM"},
    ]
    await api.post("/api/srtd/jobs/s2/journal", json={"events": events})
    sweep = (await api.get("/sweeps/sw")).text
    row = sweep.split('<tr data-job-id="s2">')[1].split("</tr>")[0]
    assert re.findall(r'data-status="(\w+)"', row) == ["cancelled"]
    timed_out = [{"seq": 3, "ts": 3.0, "state": "cancelled", "detail": {"time_limit": True}}]
    await api.put("/api/jobs/t1", json=put("timeout", exit_code=143))
    await api.post("/api/srtd/jobs/t1/journal", json={"events": timed_out})
    assert (await api.get("/api/jobs/t1")).json()["shown_status"] == "timeout"  # the time limit is no user's stop
