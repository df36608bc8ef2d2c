"""The collector against status-api.md: every route, merge rule, error and feed.

Driven in-process (httpx's ASGI transport) against a real SQLite file; the recorded
srtctl-shaped requests are the payloads status-api.md describes, in upstream's order.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from srtd.collector import SCHEMA_VERSION, Store, Tokens, _api, create_app, open_db
from srtd.collector._store import MIGRATIONS, SchemaTooNew
from tests.collector.conftest import READ, WRITE, client_for

pytestmark = pytest.mark.anyio
RECORDED = json.loads((Path(__file__).with_name("srtctl_requests.json")).read_text())


def put(status: str, at: str = "2026-11-30T10:00:00+00:00", **fields: Any) -> dict[str, Any]:
    return {"status": status, "updated_at": at, **fields}


def post(job_id: str, **fields: Any) -> dict[str, Any]:
    return {"job_id": job_id, "job_name": "toy", "submitted_at": "2026-11-30T09:00:00+00:00", **fields}


async def replay(api: httpx.AsyncClient, requests: list[dict[str, Any]]) -> list[int]:
    return [(await api.request(r["method"], r["path"], json=r["body"])).status_code for r in requests]


async def test_recorded_srtctl_requests_make_one_completed_job_with_its_history(api: httpx.AsyncClient) -> None:
    assert await replay(api, RECORDED) == [201] + [200] * 6
    job = (await api.get("/api/jobs/12345")).json()
    assert (job["job_name"], job["cluster"], job["status"], job["stage"], job["exit_code"]) == (
        "dsr1-1p1d",
        "gb200-a",
        "completed",
        "cleanup",
        0,
    )
    assert job["placeholder"] is False
    assert job["metadata"]["tags"] == ["nightly", "dsr1"]  # the POST's, merged with the first PUT's
    assert job["metadata"]["backend_type"] == "sglang"
    assert job["benchmark_results"] == {"concurrencies": [4, 8], "output_tps": [812.5, 1490.0]}
    assert job["logs_url"] == "https://logs.example/12345"
    feed = (await api.get("/api/jobs/12345/events")).json()
    assert [(e["status"], e["stage"], e["message"]) for e in feed["events"]] == [
        ("submitted", None, None),
        ("starting", "starting", "Job started on gpu-node-001"),
        ("starting", "head_infrastructure", "Job started on gpu-node-001"),  # the message stays until replaced
        ("workers", "workers", "Starting workers"),
        ("frontend", "frontend", "Starting frontend"),
        ("benchmark", "benchmark", "Running benchmark"),
        ("completed", "cleanup", "Benchmark completed"),
    ]
    assert feed["next"] == feed["events"][-1]["seq"]


async def test_health_needs_no_token(anonymous: httpx.AsyncClient) -> None:
    answer = await anonymous.get("/api/health")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok", "srtd": {"journal": 1}})


async def test_a_repeated_post_is_harmless_and_a_late_post_never_rewinds_the_status(api: httpx.AsyncClient) -> None:
    assert (await api.put("/api/jobs/j1", json=put("workers", stage="workers", metadata={"a": 1}))).status_code == 200
    placeholder = (await api.get("/api/jobs/j1")).json()
    assert (placeholder["placeholder"], placeholder["status"], placeholder["job_name"]) == (True, "workers", None)
    late = await api.post("/api/jobs", json=post("j1", cluster="c", metadata={"a": 0, "tags": ["x"]}))
    assert (late.status_code, late.json()) == (201, {"job_id": "j1", "created": False})
    again = await api.post("/api/jobs", json=post("j1"))
    assert again.status_code == 201
    job = (await api.get("/api/jobs/j1")).json()
    assert (job["placeholder"], job["status"], job["stage"], job["job_name"], job["cluster"]) == (
        False,
        "workers",
        "workers",
        "toy",
        "c",
    )
    assert job["metadata"] == {"a": 1, "tags": ["x"]}  # what the updates said wins over the submission
    events = (await api.get("/api/jobs/j1/events")).json()["events"]
    assert [e["status"] for e in events] == ["workers"]  # no `submitted` recorded after the fact


async def test_merge_rules_artifacts_and_metadata_merge_benchmark_results_replace(api: httpx.AsyncClient) -> None:
    await api.post("/api/jobs", json=post("m", metadata={"keep": 1}))
    await api.put(
        "/api/jobs/m",
        json=put("benchmark", artifacts={"a": "1", "b": "1"}, metadata={"x": 1}, benchmark_results={"tps": [1, 2]}),
    )
    await api.put(
        "/api/jobs/m", json=put("benchmark", artifacts={"b": "2"}, metadata={"x": 2, "y": 3}, benchmark_results=[7])
    )
    await api.put("/api/jobs/m", json=put("completed", exit_code=0))
    job = (await api.get("/api/jobs/m")).json()
    assert job["artifacts"] == {"a": "1", "b": "2"}
    assert job["metadata"] == {"keep": 1, "x": 2, "y": 3}
    assert job["benchmark_results"] == [7]
    assert (job["status"], job["exit_code"]) == ("completed", 0)


async def test_an_event_only_when_status_stage_or_message_changes(api: httpx.AsyncClient) -> None:
    await api.post("/api/jobs", json=post("e"))
    for body in (
        put("workers", stage="workers", message="Starting workers"),
        put("workers", stage="workers", message="Starting workers", at="2026-11-30T10:00:01+00:00"),
        put("workers", stage="workers", metadata={"no": "change"}),
        put("workers", stage="workers", message="2 of 4 workers"),
        put("workers", stage="preflight", message="2 of 4 workers"),
        put("failed", stage="preflight", message="2 of 4 workers"),
    ):
        assert (await api.put("/api/jobs/e", json=body)).status_code == 200
    events = (await api.get("/api/jobs/e/events")).json()["events"]
    assert [(e["status"], e["stage"], e["message"]) for e in events] == [
        ("submitted", None, None),
        ("workers", "workers", "Starting workers"),
        ("workers", "workers", "2 of 4 workers"),
        ("workers", "preflight", "2 of 4 workers"),
        ("failed", "preflight", "2 of 4 workers"),
    ]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (put("running"), ["status"]),
        (put("workers", stage="warmup"), ["stage"]),
        ({"status": "workers"}, ["updated_at"]),
        (put("workers", at="yesterday"), ["updated_at"]),
        (put("workers", exit_code="zero"), ["exit_code"]),
        (put("workers", metadata=[1]), ["metadata"]),
    ],
)
async def test_a_put_outside_the_contract_is_422_with_where(
    api: httpx.AsyncClient, body: dict[str, Any], where: list[str]
) -> None:
    answer = await api.put("/api/jobs/bad", json=body)
    assert answer.status_code == 422
    assert answer.json()["error"] == "the body is not a valid JobUpdate"
    assert [d["loc"] for d in answer.json()["detail"]] == [where]
    assert (await api.get("/api/jobs/bad")).status_code == 404  # nothing recorded


async def test_a_post_without_job_id_and_a_body_that_is_not_json_are_422(api: httpx.AsyncClient) -> None:
    missing = await api.post("/api/jobs", json={"job_name": "x", "submitted_at": "2026-11-30T10:00:00"})
    assert missing.status_code == 422
    assert [d["loc"] for d in missing.json()["detail"]] == [["job_id"]]
    garbage = await api.put("/api/jobs/x", content=b"{not json", headers={"Content-Type": "application/json"})
    assert garbage.status_code == 422
    assert garbage.json()["error"].startswith("the body is not JSON")
    deep = b'{"job_name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # was a RecursionError: 500
    nested = await api.put("/api/jobs/x", content=deep, headers={"Content-Type": "application/json"})
    assert (nested.status_code, nested.json()["error"]) == (422, "nested deeper than 16")


async def test_unknown_fields_are_ignored_for_newer_reporters(api: httpx.AsyncClient) -> None:
    assert (await api.put("/api/jobs/n", json=put("workers", gpu_hours=3.5))).status_code == 200


async def test_a_body_that_dawdles_is_408(api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_api, "BODY_SECONDS", 0.5)

    async def slowly() -> Any:
        yield b'{"status": '
        await anyio.sleep(5)
        yield b'"workers"}'

    answer = await api.put("/api/jobs/slow", content=slowly())
    assert (answer.status_code, answer.json()["error"]) == (408, "the body did not arrive within 0.5 s")


async def test_a_body_over_one_mib_is_413_declared_or_streamed(api: httpx.AsyncClient) -> None:
    big = put("benchmark", benchmark_results={"blob": "x" * (1 << 20)})
    answer = await api.put("/api/jobs/big", json=big)
    assert (answer.status_code, answer.json()["error"]) == (413, "body over 1048576 bytes")

    async def chunks() -> Any:  # no Content-Length: counted as it arrives
        for _ in range(17):
            yield b"x" * 65536

    streamed = await api.put("/api/jobs/big", content=chunks())
    assert streamed.status_code == 413
    assert (await api.get("/api/jobs/big")).status_code == 404


async def test_writes_need_the_write_token_and_reads_the_read_or_write_token(store: Store) -> None:
    tokens = Tokens(write=WRITE, read=READ)
    async with client_for(store, tokens, None) as nobody, client_for(store, tokens, READ) as reader:
        for client in (nobody, reader):
            for method, path, body in (
                ("POST", "/api/jobs", post("t")),
                ("PUT", "/api/jobs/t", put("workers")),
                ("POST", "/api/srtd/jobs/t/journal", {"events": [{"seq": 1, "ts": 1.0, "state": "starting"}]}),
            ):
                answer = await client.request(method, path, json=body)
                assert answer.status_code == 401, (method, path)
                assert answer.headers["WWW-Authenticate"] == "Bearer"
                assert answer.json()["error"].startswith("a write token is needed")
        for path in ("/api/jobs", "/api/jobs/t", "/api/events", "/api/jobs/t/events", "/", "/jobs/t", "/sweeps/s"):
            assert (await nobody.get(path)).status_code == 401, path
        assert (await reader.get("/api/jobs")).json() == {"jobs": []}
    async with client_for(store, tokens, "wrong") as wrong:
        assert (await wrong.put("/api/jobs/t", json=put("workers"))).status_code == 401
    async with client_for(store, Tokens(write=WRITE), None) as open_reads:
        assert (await open_reads.get("/api/jobs")).status_code == 200  # no read token: reads are open


async def test_the_cursor_feed_pages_through_every_job_in_order(api: httpx.AsyncClient) -> None:
    for job in ("a", "b"):
        await api.post("/api/jobs", json=post(job))
    await api.put("/api/jobs/a", json=put("workers"))
    await api.put("/api/jobs/b", json=put("failed", exit_code=1))
    everything = (await api.get("/api/events")).json()
    assert [(e["job_id"], e["status"]) for e in everything["events"]] == [
        ("a", "submitted"),
        ("b", "submitted"),
        ("a", "workers"),
        ("b", "failed"),
    ]
    middle = everything["events"][1]["seq"]
    rest = (await api.get(f"/api/events?after={middle}")).json()
    assert [e["seq"] for e in rest["events"]] == [e["seq"] for e in everything["events"][2:]]
    assert (await api.get(f"/api/events?after={rest['next']}")).json() == {
        "events": [],
        "next": rest["next"],
        "more": False,
    }
    only_b = (await api.get(f"/api/jobs/b/events?after={middle}")).json()
    assert [e["status"] for e in only_b["events"]] == ["failed"]
    bad = await api.get("/api/events?after=-1")
    refused = (422, "after must be a non-negative integer below 10**18, got '-1'")
    assert (bad.status_code, bad.json()["error"]) == refused


async def test_the_journal_route_records_each_event_once(api: httpx.AsyncClient) -> None:
    batch = {
        "events": [
            {"seq": 1, "ts": 1.0, "state": "starting", "detail": {"job": "toy", "job_id": "9"}},
            {"seq": 2, "ts": 1.5, "unit": "worker_0", "state": "starting"},
        ]
    }
    assert (await api.post("/api/srtd/jobs/s/journal", json=batch)).json() == {"recorded": 2}
    assert (await api.post("/api/srtd/jobs/s/journal", json=batch)).json() == {"recorded": 0}
    journal = (await api.get("/api/srtd/jobs/s/journal")).json()["events"]
    assert [(e["seq"], e.get("unit")) for e in journal] == [(1, None), (2, "worker_0")]
    wrong = await api.post("/api/srtd/jobs/s/journal", json={"events": [{"seq": "one"}]})
    assert wrong.status_code == 422


async def test_unknown_routes_and_methods_answer_json(api: httpx.AsyncClient) -> None:
    missing = await api.get("/api/nothing")
    assert (missing.status_code, missing.json()) == (404, {"error": "Not Found", "detail": []})
    wrong_method = await api.delete("/api/jobs/x")
    assert (wrong_method.status_code, wrong_method.json()["error"]) == (405, "Method Not Allowed")
    no_job = await api.get("/api/jobs/nope")
    assert (no_job.status_code, no_job.json()["error"]) == (404, "no job 'nope'")


async def test_job_ids_with_colons_and_slashes_round_trip(api: httpx.AsyncClient) -> None:
    await api.put("/api/jobs/laptop:a%2Fb", json=put("workers"))
    assert (await api.get("/api/jobs/laptop:a%2Fb")).json()["job_id"] == "laptop:a/b"


def test_a_version_1_file_is_migrated_on_open_and_a_newer_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(f"BEGIN; {MIGRATIONS[0]} PRAGMA user_version = 1; COMMIT;")
    db.execute("INSERT INTO jobs (job_id, status, created_at, changed) VALUES ('old', 'completed', 1, 1)")
    db.close()
    migrated = open_db(path)
    assert migrated.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    assert migrated.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    old = Store(migrated).job("old")
    assert old is not None  # the data came along, with the columns of version 3
    assert (old["shown_status"], Store(migrated).revision("old")) == ("completed", 0)
    assert Store(migrated).journal("old") == []
    migrated.execute("PRAGMA user_version = 99")
    migrated.close()
    with pytest.raises(SchemaTooNew, match="schema version 99, this collector knows up to 3"):
        open_db(path)


async def test_a_bug_in_the_collector_is_a_json_500_without_a_traceback(store: Store) -> None:
    store.db.close()  # every statement now raises sqlite3.ProgrammingError
    app = create_app(store, Tokens())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # as uvicorn: answer, then log
    async with httpx.AsyncClient(transport=transport, base_url="http://collector") as api:
        answer = await api.put("/api/jobs/x", json=put("workers"))
    assert (answer.status_code, answer.json()) == (500, {"error": "internal error in the collector", "detail": []})
    assert "Traceback" not in answer.text
