"""srtd's reporter against the collector in-process: the journal route, its fallback, its bounds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import httpx
import pytest

from srtd.collector import Store, Tokens, create_app
from srtd.events import Event
from srtd.reporting import StatusReporter
from srtd.reporting import _journal as journal_module
from srtd.unit import Plan, StatusReporting, Unit, UnitKind
from tests.reporting.test_sender import Log

pytestmark = pytest.mark.anyio
TOKEN = "journal-feed-token"


def make_plan(log_dir: Path, *, units: bool | None = True, variant: str | None = "concurrency=4") -> Plan:
    worker = Unit(name="w", kind=UnitKind.WORKER, phase="workers", nodes=("n",), argv=("x",), log="w.log")
    return Plan(
        name="job",
        variant=variant,
        job_id="7",
        local=True,
        log_dir=str(log_dir),
        nodes={"head": ("n",)},
        allocation=("n",),
        phases=("workers",),
        units=(worker,),
        reporting=StatusReporting(endpoints=("http://collector",), token_env="TOK", units=units),
    )


def journal(restarts: int = 40) -> list[Event]:
    out = [Event(seq=1, ts=1.0, state="starting", detail={"job": "job", "job_id": "7"})]
    for attempt in range(restarts):
        base = 2.0 + attempt
        out.append(Event(seq=len(out) + 1, ts=base, unit="w", state="starting", attempt=attempt))
        out.append(Event(seq=len(out) + 1, ts=base + 0.5, unit="w", state="exited", exit_code=1, attempt=attempt))
    out.append(Event(seq=len(out) + 1, ts=99.0, unit="w", state="failed", exit_code=1))
    out.append(Event(seq=len(out) + 1, ts=100.0, state="failed", exit_code=1))
    return out


async def drive(reporter: StatusReporter, events: list[Event]) -> float:
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.run)
        for event in events:
            reporter(event)
        began = time.monotonic()
        await reporter.finish()
        tg.cancel_scope.cancel()
    return time.monotonic() - began


async def test_the_collector_holds_the_whole_journal_sent_in_batches(store: Store, tmp_path: Path) -> None:
    (tmp_path / "benchmark.json").write_text(json.dumps({"output_tokens_per_s": 812.5}))
    app = create_app(store, Tokens(write=TOKEN))
    reporter = StatusReporter(
        make_plan(tmp_path), transport=httpx.ASGITransport(app=app), environ={"TOK": TOKEN}, log=Log(), final_wait=5
    )
    events = journal()
    await drive(reporter, events)
    (sender,) = reporter.journals
    assert [e.seq for e in store.journal("7")] == [e.seq for e in events]
    assert store.journal("7") == events
    assert sender.sent == len(events)
    assert len(sender.batches) < len(events) / 4  # batched, not one request per event
    job = store.job("7")
    assert job is not None
    assert (job["status"], job["exit_code"], job["job_name"]) == ("failed", 1, "job")
    assert job["metadata"]["variant"] == "concurrency=4"
    assert job["metadata"]["user"]
    assert job["benchmark_results"] == {"output_tokens_per_s": 812.5}


async def test_a_collector_without_the_route_gets_one_try_and_the_plain_contract(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def srtctl(request: httpx.Request) -> httpx.Response:  # upstream's collector: no journal route
        seen.append((request.method, request.url.path))
        if request.url.path.startswith("/api/srtd/"):
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(201 if request.method == "POST" else 200)

    reporter = StatusReporter(make_plan(tmp_path), transport=httpx.MockTransport(srtctl), environ={}, log=Log())
    await drive(reporter, journal(restarts=2))
    assert [p for _, p in seen if p.startswith("/api/srtd/")] == ["/api/srtd/jobs/7/journal"]
    assert [(m, p) for m, p in seen if not p.startswith("/api/srtd/")] == [
        ("POST", "/api/jobs"),
        ("PUT", "/api/jobs/7"),
        ("PUT", "/api/jobs/7"),
        ("PUT", "/api/jobs/7"),
        ("PUT", "/api/jobs/7"),
    ]
    assert reporter.journals[0].supported is False


async def test_without_units_no_journal_is_sent(tmp_path: Path) -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200)

    reporter = StatusReporter(
        make_plan(tmp_path, units=False), transport=httpx.MockTransport(answer), environ={}, log=Log()
    )
    await drive(reporter, journal(restarts=1))
    assert reporter.journals == []
    assert not [p for p in seen if p.startswith("/api/srtd/")]


async def test_a_hanging_journal_route_holds_the_end_for_final_wait_at_most(tmp_path: Path) -> None:
    async def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/api/srtd/"):
            await anyio.sleep_forever()
        return httpx.Response(200)

    reporter = StatusReporter(
        make_plan(tmp_path), transport=httpx.MockTransport(answer), environ={}, log=Log(), final_wait=0.3
    )
    assert await drive(reporter, journal()) < 2.0


async def test_a_full_queue_drops_events_instead_of_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "QUEUE", 8)
    reporter = StatusReporter(make_plan(tmp_path), transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    for event in journal(restarts=10):  # nobody is sending yet
        reporter(event)
    assert reporter.journals[0].dropped == len(journal(restarts=10)) - 8


def test_a_journal_batch_before_the_submission_still_leaves_submitted_first_in_the_history(store: Store) -> None:
    """srtd sends its journal and its status on two queues: the journal may reach the collector
    first (seen under load), making a bare placeholder; the POST then still starts the history."""
    from srtd.status_api import JobCreate, JobUpdate

    store.record_journal("7", journal(restarts=0)[:1])
    store.record_post(JobCreate(job_id="7", job_name="job", submitted_at="2026-12-02T10:00:00Z"))
    store.record_put("7", JobUpdate(status="starting", updated_at="2026-12-02T10:00:01Z", stage="starting"))
    assert [e["status"] for e in store.events(0, "7")] == ["submitted", "starting"]
    # a POST after an update never rewinds the history
    store.record_put("8", JobUpdate(status="starting", updated_at="2026-12-02T10:00:01Z", stage="starting"))
    store.record_post(JobCreate(job_id="8", job_name="job", submitted_at="2026-12-02T10:00:00Z"))
    assert [e["status"] for e in store.events(0, "8")] == ["starting"]
