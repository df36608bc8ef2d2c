"""Requests on the wire (httpx MockTransport): token, attempts, redirects, warnings, bounds."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest

from srtd.events import Event
from srtd.reporting import StatusReporter, post_submitted, report_submitted
from srtd.reporting import _reporter as reporter_module
from srtd.reporting import _sender as sender_module
from srtd.unit import Plan, StatusReporting, Unit, UnitKind

TOKEN = "tok-7f3a9c"
# the plain contract alone: asking a collector for the journal feed is tests/collector/test_live.py's
SETTINGS = StatusReporting(
    endpoints=("http://one", "http://two"), token_env="TEST_STATUS_TOKEN", job_id_prefix="p:", units=False
)

pytestmark = pytest.mark.anyio


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **kw: Any) -> None:
        self.lines.append(("warning", event, kw))

    def debug(self, event: str, **kw: Any) -> None:
        self.lines.append(("debug", event, kw))

    def levels(self) -> list[str]:
        return [level for level, _, _ in self.lines]


def make_plan(settings: StatusReporting = SETTINGS) -> Plan:
    worker = Unit(name="w", kind=UnitKind.WORKER, phase="workers", nodes=("n",), argv=("x",), log="w.log")
    return Plan(
        name="job",
        job_id="7",
        local=True,
        log_dir="/l",
        nodes={"head": ("n",)},
        allocation=("n",),
        phases=("workers",),
        units=(worker,),
        reporting=settings,
    )


def events() -> list[Event]:
    return [
        Event(seq=1, ts=1.0, state="starting"),
        Event(seq=2, ts=2.0, unit="w", state="starting", prev="waiting"),
        Event(seq=3, ts=3.0, state="succeeded", prev="stopping", exit_code=0),
    ]


async def drive(reporter: StatusReporter, final: bool = True) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.run)
        for event in events():
            reporter(event)
        await reporter.finish()
        tg.cancel_scope.cancel()


async def test_every_request_goes_to_every_collector_with_the_token() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201 if request.method == "POST" else 200)

    reporter = StatusReporter(
        make_plan(), transport=httpx.MockTransport(answer), environ={"TEST_STATUS_TOKEN": TOKEN}, log=Log()
    )
    await drive(reporter)
    for host in ("one", "two"):
        mine = [r for r in seen if r.url.host == host]
        assert [(r.method, r.url.path) for r in mine] == [
            ("POST", "/api/jobs"),
            ("PUT", "/api/jobs/p:7"),
            ("PUT", "/api/jobs/p:7"),
            ("PUT", "/api/jobs/p:7"),
        ]
        assert [json.loads(r.content).get("status") for r in mine[1:]] == ["starting", "workers", "completed"]
    assert {r.headers["authorization"] for r in seen} == {f"Bearer {TOKEN}"}


async def test_without_the_variable_no_authorization_header_is_sent() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    await drive(StatusReporter(make_plan(), transport=httpx.MockTransport(answer), environ={}, log=Log()))
    assert seen
    assert all("authorization" not in r.headers for r in seen)


@pytest.mark.parametrize(("code", "why"), [(302, "redirected"), (401, "refused the token"), (403, "refused the token")])
async def test_a_redirect_or_a_refused_token_is_a_warning_and_is_not_followed(code: int, why: str) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(code, headers={"Location": "http://login/sso"})

    log = Log()
    plan = make_plan(replace(SETTINGS, endpoints=("http://one",)))
    await drive(StatusReporter(plan, transport=httpx.MockTransport(answer), environ={}, log=log))
    assert {r.url.host for r in seen} == {"one"}  # never the login page
    assert len(seen) == 4  # one attempt each: a refusal is not retried
    assert log.levels() == ["warning", "debug", "debug", "debug"]  # one warning per collector and answer
    assert why in log.lines[0][1]
    assert log.lines[0][2]["status"] == code


async def test_network_errors_and_5xx_get_two_attempts_and_stay_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender_module, "RETRY_PAUSE", 0.0)
    calls = {"n": 0}

    def answer(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] % 2:
            raise httpx.ConnectError("refused")
        return httpx.Response(503)

    log = Log()
    plan = make_plan(replace(SETTINGS, endpoints=("http://one",)))
    reporter = StatusReporter(plan, transport=httpx.MockTransport(answer), environ={}, log=log)
    await drive(reporter)
    assert calls["n"] == 8  # 4 requests x 2 attempts
    assert set(log.levels()) == {"debug"}
    assert [code for _, code in reporter.senders[0].sent] == [None] * 4


class Hang(httpx.AsyncBaseTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await anyio.sleep_forever()
        raise AssertionError


async def test_a_hanging_collector_holds_the_end_for_final_wait_only() -> None:
    reporter = StatusReporter(make_plan(), transport=Hang(), environ={}, log=Log(), final_wait=0.2)
    began = time.monotonic()
    await drive(reporter)
    assert time.monotonic() - began < 2.0  # generous: the bound is 0.2 s


async def test_a_collector_hanging_since_long_before_the_end_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender_module, "FIRST_ANSWER_WITHIN", 0.05)
    reporter = StatusReporter(make_plan(), transport=Hang(), environ={}, log=Log(), final_wait=30.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.run)
        for event in events():
            reporter(event)
        await anyio.sleep(0.3)  # the POST hangs since then
        began = time.monotonic()
        await reporter.finish()
        took = time.monotonic() - began
        tg.cancel_scope.cancel()
    assert took < 5.0  # generous: not the 30 s final_wait


async def test_a_slow_final_answer_is_waited_for_within_final_wait() -> None:
    class Slow(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if b'"completed"' in request.content:
                await anyio.sleep(0.2)
            return httpx.Response(200)

    plan = make_plan(replace(SETTINGS, endpoints=("http://one",)))
    reporter = StatusReporter(plan, transport=Slow(), environ={}, log=Log(), final_wait=5.0)
    await drive(reporter)
    sent = reporter.senders[0].sent
    assert [(r.body.get("status"), code) for r, code in sent][-1] == ("completed", 200)


async def test_a_full_queue_drops_updates_instead_of_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender_module, "QUEUE", 2)
    plan = make_plan(replace(SETTINGS, endpoints=("http://one",)))
    reporter = StatusReporter(plan, transport=httpx.MockTransport(lambda r: httpx.Response(200)), environ={}, log=Log())
    for event in events():  # nobody drains: the run task is not started
        reporter(event)
    assert reporter.senders[0].dropped == 2  # POST + 3 PUTs, room for 2


async def test_post_submitted_records_the_job_with_its_prefix_and_metadata() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201)

    ok = await post_submitted(
        replace(SETTINGS, cluster="lab"),
        "12345",
        job_name="job",
        recipe="r.yaml",
        metadata={"tags": ["a"]},
        submitted_at=0.0,
        transport=httpx.MockTransport(answer),
        environ={"TEST_STATUS_TOKEN": TOKEN},
        log=Log(),
    )
    assert ok
    assert [(r.method, str(r.url)) for r in seen] == [
        ("POST", "http://one/api/jobs"),
        ("POST", "http://two/api/jobs"),
    ]
    assert json.loads(seen[0].content) == {
        "job_id": "p:12345",
        "job_name": "job",
        "cluster": "lab",
        "recipe": "r.yaml",
        "submitted_at": "1970-01-01T00:00:00+00:00",
        "metadata": {"tags": ["a"]},
    }
    assert seen[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_report_submitted_is_false_when_a_collector_refuses_or_nothing_is_configured() -> None:
    refuse = httpx.MockTransport(lambda r: httpx.Response(403))
    assert report_submitted(SETTINGS, "1", job_name="j", transport=refuse) is False
    assert report_submitted(None, "1", job_name="j") is False
    accept = httpx.MockTransport(lambda r: httpx.Response(201))
    assert report_submitted(SETTINGS, "1", job_name="j", transport=accept) is True


def test_report_submitted_gives_up_on_a_hanging_collector_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporter_module, "SUBMIT_WAIT", 0.2)
    began = time.monotonic()
    assert report_submitted(SETTINGS, "1", job_name="j", transport=Hang()) is False
    assert time.monotonic() - began < 3.0  # generous: the bound is 0.2 s
