"""The dashboard's pages as HTML (the browser tests, tests/browser, see them rendered)."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from srtd.collector import Store, Tokens
from tests.collector.conftest import READ, WRITE, client_for

pytestmark = pytest.mark.anyio


def put(status: str, **fields: Any) -> dict[str, Any]:
    return {"status": status, "updated_at": "2026-11-30T10:00:00+00:00", **fields}


async def seed(api: httpx.AsyncClient) -> None:
    for i, (tps, user) in enumerate(((100.0, "ana"), (180.0, "ana"), (250.0, "bo"))):
        job = f"sw-{i}"
        body = {"job_id": job, "job_name": "conc-sweep", "cluster": "lab", "submitted_at": f"2026-11-30T0{i}:00:00"}
        await api.post("/api/jobs", json=body)
        meta = {"variant": f"concurrency={2**i}", "user": user, "gpus": 2}
        await api.put(f"/api/jobs/{job}", json=put("starting", started_at="2026-11-30T10:00:00+00:00", metadata=meta))
        await api.put(f"/api/jobs/{job}", json=put("benchmark", stage="benchmark"))
        measured = {"output_tokens_per_s": tps, "ttft_ms": {"p50": 9}, "tpot_ms": {"p50": 10.0 * 2**i}}
        final = put("completed", exit_code=0, benchmark_results=measured)
        await api.put(f"/api/jobs/{job}", json=final)
    # a job id is letters, digits and a few marks (tests/hostile/test_collector_input.py): markup goes in the texts
    evil = put("failed", message="<b>boom</b>", exit_code=1, metadata={"user": "<script>alert(1)</script>"})
    await api.put("/api/jobs/evil", json=evil)


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-job-id="([^"]+)"', html)


async def test_the_jobs_table_filters_and_sorts(api: httpx.AsyncClient) -> None:
    await seed(api)
    everything = (await api.get("/")).text
    assert rows(everything) == [
        "evil",
        "sw-2",
        "sw-1",
        "sw-0",
    ]  # newest first
    assert "<script>" not in everything.split("</head>")[1]  # every value escaped
    assert 'data-feed="/api/events"' in everything
    assert rows((await api.get("/?user=ANA")).text) == ["sw-1", "sw-0"]
    assert rows((await api.get("/?status=failed")).text) == ["evil"]
    assert rows((await api.get("/?name=concurrency%3D4")).text) == ["sw-2"]
    assert rows((await api.get("/?cluster=lab&sort=user&order=desc")).text) == ["sw-2", "sw-1", "sw-0"]
    assert rows((await api.get("/?cluster=lab&sort=user&order=asc")).text) == ["sw-1", "sw-0", "sw-2"]
    fragment = await api.get("/", headers={"X-Fragment": "1"})
    assert not fragment.text.startswith("<!doctype")
    assert 'data-job-id="sw-0"' in fragment.text
    assert '<a href="/sweeps/conc-sweep">conc-sweep</a>' in everything


async def test_the_job_page_shows_the_history_and_the_sweep_page_every_point(api: httpx.AsyncClient) -> None:
    await seed(api)
    job = (await api.get("/jobs/sw-1")).text
    assert re.findall(r'data-status="(\w+)"', job.split("stage history")[1]) == [
        "submitted",
        "starting",
        "benchmark",
        "completed",
    ]
    sweep = (await api.get("/sweeps/conc-sweep")).text
    points = sweep.split('<table class="sweep">')[1].split("</table>")[0]
    assert re.findall(r">(concurrency=\d)</a>", points) == ["concurrency=1", "concurrency=2", "concurrency=4"]
    chart = json.loads(sweep.split('<script type="application/json" id="chart-data">')[1].split("</script>")[0])
    assert chart["series"] == ["conc-sweep"]
    assert [(p["point"], p["tok_s"], p["tok_s_per_gpu"], p["tok_s_per_user"]) for p in chart["points"]] == [
        ("concurrency=1", 100.0, 50.0, 100.0),
        ("concurrency=2", 180.0, 90.0, 50.0),
        ("concurrency=4", 250.0, 125.0, 25.0),
    ]
    assert '<th class="col-ttft_p50_ms">TTFT p50 (ms)</th>' in sweep
    assert '<td class="col-tok_s_per_gpu">125</td>' in sweep  # rounded, in the table too
    fragment = (await api.get("/sweeps/conc-sweep", headers={"X-Fragment": "1"})).text  # a live refresh
    assert fragment.lstrip().startswith('<p class="count">3 points')
    assert 'id="chart-data"' in fragment
    assert "<head>" not in fragment
    assert (await api.get("/jobs/nope")).status_code == 404


async def test_the_compare_page_takes_its_selection_from_the_url_and_downloads_its_table(
    api: httpx.AsyncClient,
) -> None:
    await seed(api)
    await api.post("/api/jobs", json={"job_id": "lone", "job_name": "lone", "submitted_at": "2026-11-30T11:00:00"})
    lone = {"output_tokens_per_s": 50.0, "tpot_ms": {"p50": 20.0}, "concurrency": 8}
    await api.put("/api/jobs/lone", json=put("completed", benchmark_results=lone, metadata={"gpus": 1}))
    url = "/compare?sweep=conc-sweep&job=lone&job=nope&sweep=conc-sweep"
    page = (await api.get(url)).text
    chart = json.loads(page.split('id="chart-data">')[1].split("</script>")[0])
    assert chart["series"] == ["conc-sweep", "lone"]
    assert [p["job_id"] for p in chart["points"]] == ["sw-0", "sw-1", "sw-2", "lone"]
    assert "not found: nope" in page
    assert 'href="/compare?sweep=conc-sweep&amp;job=lone&amp;job=nope&amp;format=csv"' in page
    got = await api.get(url + "&format=csv")
    assert got.headers["content-type"] == "text/csv; charset=utf-8"
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''compare.csv"
    table = list(csv.DictReader(io.StringIO(got.text)))
    assert [(r["point"], r["tok/s per GPU"], r["Pareto"]) for r in table] == [
        ("concurrency=1", "50.0", "True"),
        ("concurrency=2", "90.0", "True"),
        ("concurrency=4", "125.0", "True"),
        ("lone", "50.0", "True"),
    ]
    downloaded = (await api.get(url + "&format=json")).json()["points"]
    assert [(p["series"], p["concurrency"], p["tok_s_per_user"]) for p in downloaded][-1] == ("lone", 8, 50.0)
    refused = await api.get(url + "&format=xml")
    assert (refused.status_code, refused.json()["error"]) == (422, "format must be one of csv, json")
    empty = (await api.get("/compare")).text
    assert "Nothing chosen" in empty


async def test_the_jobs_table_has_a_box_per_job_and_sweep_that_submits_to_compare(api: httpx.AsyncClient) -> None:
    await seed(api)
    table = (await api.get("/")).text
    assert '<form class="compare" method="get" action="/compare">' in table
    assert re.findall(r'<input type="checkbox" name="job" value="([^"]+)"', table) == ["evil", "sw-2", "sw-1", "sw-0"]
    assert set(re.findall(r'<input type="checkbox" name="sweep" value="([^"]+)"', table)) == {"conc-sweep"}


async def test_a_name_with_markup_is_text_on_the_jobs_sweep_and_compare_pages(api: httpx.AsyncClient) -> None:
    name = '<script>alert("x")</script>\'é✓'
    at = "2026-11-30T10:00:00"
    assert (await api.post("/api/jobs", json={"job_id": "m1", "job_name": name, "submitted_at": at})).status_code == 201
    results = {"output_tokens_per_s": 1.0, "tpot_ms": {"p50": 1.0}}
    done = put("completed", metadata={"variant": "concurrency=1"}, benchmark_results=results)
    await api.put("/api/jobs/m1", json=done)
    pages = [(await api.get(u)).text for u in ("/", "/sweeps/" + quote(name, safe=""), "/compare?sweep=" + quote(name))]
    for page in pages:
        body = page.split("</head>")[1]
        assert "<script>alert" not in body
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&#39;é✓" in body
    chart = json.loads(pages[2].split('id="chart-data">')[1].split("</script>")[0])
    assert chart["series"] == [name]  # the JSON in the page reads back as written


async def test_the_job_page_of_an_srtd_job_shows_units_culprit_and_timeline(api: httpx.AsyncClient) -> None:
    events = [
        {"seq": 1, "ts": 0.0, "state": "starting", "detail": {"job": "toy", "job_id": "9", "nodes": {"w": "n1"}}},
        {"seq": 2, "ts": 0.1, "unit": "w", "state": "starting", "attempt": 0},
        {"seq": 3, "ts": 0.5, "unit": "w", "state": "exited", "exit_code": 3},
        {"seq": 4, "ts": 0.6, "unit": "w", "state": "starting", "attempt": 1},
        {"seq": 5, "ts": 0.9, "unit": "w", "state": "failed", "exit_code": 3, "reason": "exited 3"},
        {"seq": 6, "ts": 1.0, "state": "failed", "exit_code": 1},
    ]
    await api.post("/api/srtd/jobs/s1/journal", json={"events": events})
    await api.put("/api/jobs/s1", json=put("failed", exit_code=1))
    page = (await api.get("/jobs/s1")).text
    units = page.split('<table class="units">')[1].split("</table>")[0]
    assert re.findall(r"<td>([^<]*)", units)[:5] == ["w ", "n1", "", "", "1"]
    assert "failure culprit: <b>w</b>" in page
    assert '<span class="unit-state unit-failed">failed</span>' in units
    assert "<svg" in page.split("startup timeline")[1]


async def test_the_timeline_needs_no_style_the_csp_would_refuse(api: httpx.AsyncClient) -> None:
    events = [{"seq": 1, "ts": 0.0, "state": "starting"}, {"seq": 2, "ts": 0.1, "unit": "w", "state": "starting"}]
    await api.post("/api/srtd/jobs/n1/journal", json={"events": events})
    answer = await api.get("/jobs/n1")
    nonce = re.findall(r"'nonce-([A-Za-z0-9_-]{22})'", answer.headers["content-security-policy"])
    assert len(nonce) == 1
    assert "<style" not in answer.text
    assert " style=" not in answer.text  # bars are SVG attributes and classes, styled by style.css
    assert f'<script src="/static/live.js" nonce="{nonce[0]}" defer></script>' in answer.text
    assert '<main data-feed="/api/srtd/jobs/n1/changes" data-cursor="1">' in answer.text  # the job's revision
    fragment = await api.get("/jobs/n1", headers={"X-Fragment": "1"})
    assert '<rect class="bar bar-starting" data-state="starting"' in fragment.text
    assert "<head>" not in fragment.text


async def test_a_read_token_makes_pages_ask_for_a_login_that_sets_a_cookie_without_the_token(store: Store) -> None:
    tokens = Tokens(write=WRITE, read=READ)
    async with client_for(store, tokens, None) as browser:
        refused = await browser.get("/")
        assert refused.status_code == 401
        assert 'action="/login"' in refused.text
        wrong = await browser.post(
            "/login", content=b"token=nope", headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert wrong.status_code == 401
        huge = await browser.post("/login", content=b"token=" + b"x" * (1 << 20))  # read up to a bound, not whole
        assert (huge.status_code, huge.json()["error"]) == (413, "body over 4096 bytes")
        ok = await browser.post(
            "/login", content=f"token={READ}".encode(), headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert (ok.status_code, ok.headers["location"]) == (303, "/")
        cookie = ok.headers["set-cookie"]
        assert READ not in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        page = await browser.get("/")
        assert page.status_code == 200
        assert READ not in page.text
        assert WRITE not in page.text
        assert (await browser.get("/api/jobs")).status_code == 200  # the cookie reads the API too
        assert (await browser.put("/api/jobs/x", json=put("workers"))).status_code == 401  # and never writes


async def test_the_assets_ship_in_the_package(api: httpx.AsyncClient) -> None:
    script = await api.get("/static/live.js")
    assert script.status_code == 200
    assert "X-Fragment" in script.text
    assert (await api.get("/static/style.css")).headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("name", ["\n0", "a\nb", "tab\there", "line\r\nend"])
async def test_a_sweep_named_with_a_line_break_has_its_page(api: httpx.AsyncClient, name: str) -> None:
    """A sweep is a job's name, any text (hypothesis found "\\n0"): its link from the jobs
    table must reach its page, which a path parameter of `.*` (no newline) did not."""
    body = {"job_id": "nl-1", "job_name": name, "cluster": "lab", "submitted_at": "2026-11-30T01:00:00"}
    assert (await api.post("/api/jobs", json=body)).status_code in (200, 201)
    meta = {"variant": "concurrency=4"}
    assert (await api.put("/api/jobs/nl-1", json=put("starting", metadata=meta))).status_code == 200
    page = await api.get("/sweeps/" + quote(name, safe=""))
    assert page.status_code == 200
    assert ">concurrency=4</a>" in page.text
