"""A property of `srtd collector` (a real uvicorn server): whatever JSON document a writer sends
to `POST /api/jobs`, `PUT /api/jobs/{id}` or the journal route, it is refused with a 4xx, or,
once stored, every reader (the jobs table sorted any way, the job's page, the API's GETs, the
sweep page) answers 200.  The documents are the contract's valid bodies with fields replaced
or added by hostile JSON: NaN, huge numbers, lone surrogates, markup, deep nesting, wrong types.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.collector.helpers import Running
from tests.hostile.collector_server import assert_clean, assert_readable, served, writer

__all__ = ["served"]
pytestmark = pytest.mark.slow

AT = "2026-11-30T10:00:00+00:00"
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -0.0, 2.0**53, 2**31, -(2**31) - 1]),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "\ud800",
            "<script>alert(1)</script>",
            "javascript:alert(document.domain)",
            "https://logs.example/x",
            "9999-12-31T23:59:59-01:00",
            "0001-01-01",
            "2026-11-30T10:00:00",
            "x" * 70_000,
            "a/../b",
            "running",
            "ready",
            "completed",
        ]
    ),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
NESTED = st.integers(min_value=1, max_value=40).map(lambda depth: json.loads("[" * depth + "]" * depth))
VALUES = st.one_of(JSON, NESTED)
JOB_IDS = st.one_of(st.sampled_from(["p1", "p2", "lab:7", "a/b", "x"]), st.text(max_size=12))

PUT = {"status": "workers", "updated_at": AT, "stage": "workers", "exit_code": 0, "logs_url": "https://l/x"}
POST = {"job_id": "p1", "job_name": "prop", "cluster": "lab", "submitted_at": AT, "metadata": {"variant": "a"}}
EVENT = {"seq": 1, "ts": 1_800_000_000.0, "unit": "w0", "state": "ready", "detail": {"seconds": 0.5}}
FIELDS = {
    "PUT": [*PUT, "message", "started_at", "completed_at", "benchmark_results", "artifacts", "metadata"],
    "POST": [*POST, "recipe"],
    "JOURNAL": [*EVENT, "prev", "exit_code", "attempt", "reason", "pid"],
}


@st.composite
def writes(draw: st.DrawFn) -> tuple[str, str, str, Any]:
    """(method, path, job id, document): a valid body with hostile values put in, or any JSON at all."""
    kind = draw(st.sampled_from(["PUT", "POST", "JOURNAL"]))
    job_id = draw(JOB_IDS)
    base: dict[str, Any] = {"PUT": dict(PUT), "POST": {**POST, "job_id": job_id}, "JOURNAL": dict(EVENT)}[kind]
    for field in draw(st.lists(st.sampled_from(FIELDS[kind]), max_size=3)):
        base[field] = draw(VALUES)
    if kind == "JOURNAL" and draw(st.booleans()):
        base["detail"] = draw(st.dictionaries(st.sampled_from(["nodes", "tiers", "units", "after", "result"]), VALUES))
    document = draw(st.one_of(st.just(base), VALUES)) if draw(st.integers(0, 9)) == 0 else base
    quoted = quote(job_id, safe=":/")
    method, path = {
        "PUT": ("PUT", f"/api/jobs/{quoted}"),
        "POST": ("POST", "/api/jobs"),
        "JOURNAL": ("POST", f"/api/srtd/jobs/{quoted}/journal"),
    }[kind]
    if kind == "JOURNAL" and document is base:
        document = {"events": [base]}
    return method, path, job_id, document


def readers_of(client: httpx.Client, job_id: str) -> None:
    assert_readable(client, job_id)
    for query in ("sort=exit_code&order=desc", "sort=updated&order=asc", "sort=user", "status=workers"):
        answer = client.get(f"/?{query}")
        assert_clean(answer)
        assert answer.status_code == 200
    for download in ("", "&format=csv", "&format=json"):  # the comparison reads benchmark_results
        answer = client.get(f"/compare?job={quote(job_id, safe='')}{download}")
        assert_clean(answer)
        assert answer.status_code == 200
    job = client.get(f"/api/jobs/{quote(job_id, safe=':/')}").json()
    meta = job.get("metadata") or {}
    sweep = meta.get("sweep") or (meta.get("variant") and job["job_name"])
    if sweep:
        answer = client.get("/sweeps/" + quote(str(sweep), safe=""))
        assert_clean(answer)
        assert answer.status_code == 200


@settings(max_examples=60)
@given(write=writes())
def test_a_document_is_refused_or_readable_by_every_reader(served: Running, write: tuple[str, str, str, Any]) -> None:
    method, path, job_id, document = write
    body = json.dumps(document).encode("utf-8", "surrogatepass")
    with writer(served.url) as client:
        answer = client.request(method, path, content=body)
        assert_clean(answer)
        if answer.status_code >= 400:
            # 404: a PUT to a job the collector never saw created (the status contract's answer)
            assert answer.status_code in ((400, 404, 413, 422) if method == "PUT" else (400, 413, 422)), answer.text
            assert_readable(client, None)
            return
        assert answer.status_code in (200, 201)
        readers_of(client, answer.json().get("job_id", job_id))
