"""`srtd collector` served by uvicorn, fed hostile requests: every answer is a readable 4xx or a
value every reader can render back; never a 500, a traceback, a reset or a link to a script."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.collector.helpers import Running
from tests.hostile.collector_server import WRITE, assert_clean, assert_readable, db_of, served, writer

__all__ = ["served"]
pytestmark = pytest.mark.slow

AT = "2026-11-30T10:00:00+00:00"
BIG = 8 << 20  # over the 1 MiB bound and over what the sockets' buffers hold


def put(status: str = "workers", **fields: Any) -> dict[str, Any]:
    return {"status": status, "updated_at": AT, **fields}


@pytest.mark.parametrize("connection", ["keep-alive", "close"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_every_oversized_body_gets_a_413_the_client_can_read(served: Running, framing: str, connection: str) -> None:
    body = b'{"status": "' + b"x" * BIG + b'"}'

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1 << 16):
            yield body[start : start + (1 << 16)]

    answers = []
    for _ in range(20):
        with writer(served.url) as client:
            content = body if framing == "content-length" else chunks()
            try:
                answer = client.put("/api/jobs/big", content=content, headers={"Connection": connection})
                answers.append((answer.status_code, answer.json()["error"]))
            except httpx.TransportError as err:
                answers.append((0, type(err).__name__))
    assert answers == [(413, "body over 1048576 bytes")] * 20


def test_a_client_that_sends_its_whole_body_before_reading_gets_the_413(served: Running) -> None:
    """What a simple client does (send everything, then read): the answer was lost to a reset
    when the collector closed the socket with the body unread (`Connection: close`)."""
    host, port = served.url.removeprefix("http://").split(":")
    body = b"x" * (2 * BIG)
    firsts = []
    for framing in ("content-length", "chunked"):
        for _ in range(20):
            length = f"Content-Length: {len(body)}" if framing == "content-length" else "Transfer-Encoding: chunked"
            head = f"PUT /api/jobs/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITE}\r\n{length}\r\n"
            data = body if framing == "content-length" else b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                try:
                    sock.sendall(head.encode() + b"Connection: close\r\n\r\n" + data)
                    firsts.append(sock.recv(1 << 16).split(b"\r\n", 1)[0])
                except ConnectionResetError:
                    firsts.append(b"reset")
    assert firsts == [b"HTTP/1.1 413 Request Entity Too Large"] * 40


def test_a_refusal_before_the_body_is_read_is_readable_too(served: Running) -> None:
    body = b"x" * BIG
    for _ in range(5):
        with httpx.Client(base_url=served.url, timeout=30) as anonymous:  # no token: 401 before any reading
            answer = anonymous.put("/api/jobs/big", content=body, headers={"Connection": "close"})
        assert (answer.status_code, answer.headers["www-authenticate"]) == (401, "Bearer")


# A value written with a 2xx used to break every reader later (a 500): now each is a 422 naming the field.
REFUSED_PUTS = [
    (put(benchmark_results={"ttft": float("nan")}), ["benchmark_results", "ttft"]),
    (put(metadata={"x": float("inf")}), ["metadata", "x"]),
    (put(updated_at="9999-12-31T23:59:59-01:00"), ["updated_at"]),
    (put(started_at="0001-01-01T00:00:00"), ["started_at"]),
    (put(exit_code=10**30), ["exit_code"]),
    (put(exit_code=2**31), ["exit_code"]),
    (put(metadata={"big": 10**30}), ["metadata", "big"]),
    (put(logs_url="javascript:alert(document.domain)"), ["logs_url"]),
    (put(logs_url="data:text/html,<script>alert(1)</script>"), ["logs_url"]),
    (put(message="m" * 5000), ["message"]),
    (put(status="exploded"), ["status"]),
]


@pytest.mark.parametrize(("body", "where"), REFUSED_PUTS)
def test_a_put_no_reader_could_render_is_422_naming_the_field(
    served: Running, body: dict[str, Any], where: list[Any]
) -> None:
    with writer(served.url) as client:
        answer = client.put("/api/jobs/hostile-put", content=json.dumps(body))  # NaN too, unlike json=
        assert_clean(answer)
        assert answer.status_code == 422
        assert where in [d["loc"] for d in answer.json()["detail"]]
        assert client.get("/api/jobs/hostile-put").status_code == 404  # nothing stored
        assert_readable(client, None)


def test_unicode_that_cannot_be_stored_is_422(served: Running) -> None:
    raw = b'{"status": "workers", "updated_at": "%s", "message": "\\ud800"}' % AT.encode()
    with writer(served.url) as client:
        answer = client.put("/api/jobs/lone-surrogate", content=raw)
    assert (answer.status_code, answer.json()["detail"]) == (
        422,
        [{"loc": ["message"], "msg": "not valid Unicode (a lone surrogate)"}],
    )


def journal_event(**fields: Any) -> dict[str, Any]:
    return {"seq": 1, "ts": 1_800_000_000.0, "state": "starting", **fields}


@pytest.mark.parametrize(
    ("event", "says"),
    [
        (journal_event(state="exploded"), "'exploded' is not a job state"),
        (journal_event(unit="w0", state="running"), "'running' is not a unit state"),
        (journal_event(detail={"nodes": ["n1"]}), "nodes: Input should be a valid dictionary"),
        (journal_event(detail={"tiers": {"w0": "high"}}), "tiers.w0: Input should be a valid integer"),
        (
            journal_event(unit="w0", state="ready", detail={"seconds": "soon"}),
            "seconds: Input should be a valid number",
        ),
        (journal_event(unit="w0", state="waiting", detail={"after": [1]}), "after.0: Input should be a valid string"),
        (journal_event(seq=2**63), "seq"),
        (journal_event(ts=1e300), "ts"),
    ],
)
def test_a_journal_event_the_job_page_could_not_fold_is_422(served: Running, event: dict[str, Any], says: str) -> None:
    with writer(served.url) as client:
        answer = client.post("/api/srtd/jobs/hostile-journal/journal", json={"events": [event]})
        assert_clean(answer)
        assert answer.status_code == 422
        said = [f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in answer.json()["detail"]]
        assert any(says in line for line in said), said
        assert client.get("/api/jobs/hostile-journal").status_code == 404
        assert_readable(client, None)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/api/jobs/", put()),
        ("PUT", "/api/jobs/" + "x" * 300, put()),
        ("PUT", "/api/jobs/a%20b", put()),
        ("PUT", "/api/jobs/a/%2E%2E/b", put()),
        ("POST", "/api/srtd/jobs//journal", {"events": [journal_event()]}),
        ("POST", "/api/jobs", {"job_id": "", "job_name": "n", "submitted_at": AT}),
        ("POST", "/api/jobs", {"job_id": "x" * 60_000, "job_name": "n", "submitted_at": AT}),
        ("POST", "/api/jobs", {"job_id": "<script>", "job_name": "n", "submitted_at": AT}),
    ],
)
def test_every_route_holds_job_ids_to_one_rule(served: Running, method: str, path: str, body: dict[str, Any]) -> None:
    with writer(served.url) as client:
        before = client.get("/api/jobs").json()["jobs"]
        answer = client.request(method, path, json=body)
        assert_clean(answer)
        assert answer.status_code == 422, answer.text
        assert client.get("/api/jobs").json()["jobs"] == before


def test_a_60000_character_id_in_the_path_is_refused(served: Running) -> None:
    with writer(served.url) as client:
        answer = client.put("/api/jobs/" + "x" * 60_000, json=put())
        assert 400 <= answer.status_code < 500  # uvicorn's bound on a request head (400) comes first
        assert all(len(j["job_id"]) < 300 for j in client.get("/api/jobs").json()["jobs"])


@pytest.mark.parametrize(
    "headers",
    [
        {"Cookie": "srtd_collector_session=sésame"},
        {"Cookie": "srtd_collector_session=\u00ff\u00fe"},
        {"Authorization": "Bearer jéton"},
    ],
)
def test_a_non_ascii_cookie_or_token_is_401_not_500(served: Running, headers: dict[str, str]) -> None:
    encoded = {k: v.encode("utf-8") for k, v in headers.items()}
    for path in ("/", "/api/jobs"):
        answer = httpx.get(served.url + path, headers=encoded, timeout=10)
        assert_clean(answer)
        assert answer.status_code == 401


@pytest.mark.parametrize("after", ["-1", "²", "1e3", "", "0x10", "9" * 5000, "99999999999999999999", "１"])
def test_an_odd_cursor_is_422(served: Running, after: str) -> None:
    with writer(served.url) as client:
        for path in ("/api/events", "/api/jobs/x/events"):
            answer = client.get(path, params={"after": after})
            assert_clean(answer)
            assert answer.status_code == 422


@pytest.mark.parametrize("depth", [17, 5000, 100_000])
def test_deeply_nested_json_is_422(served: Running, depth: int) -> None:
    nested = json.dumps(put(metadata={"a": "HERE"})).replace('"HERE"', "[" * depth + "]" * depth)
    with writer(served.url) as client:
        answer = client.put("/api/jobs/nested", content=nested.encode())
        assert_clean(answer)
        assert answer.status_code == 422
        assert answer.json()["error"] == "nested deeper than 16"


def test_a_script_url_stored_before_the_checks_is_shown_as_text_under_a_csp(served: Running) -> None:
    with writer(served.url) as client:
        assert client.put("/api/jobs/old-row", json=put(logs_url="https://logs.example/1")).status_code == 200
        with sqlite3.connect(db_of(served)) as db:  # a row an older collector let in
            db.execute("UPDATE jobs SET logs_url = 'javascript:alert(document.domain)' WHERE job_id = 'old-row'")
        page = client.get("/jobs/old-row")
    assert_clean(page)
    assert page.status_code == 200
    assert 'href="javascript:' not in page.text
    assert "<dd>javascript:alert(document.domain)</dd>" in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    nonce = re.search(r"'nonce-([^']+)'", policy)
    assert nonce is not None
    assert f'<script src="/static/live.js" nonce="{nonce[1]}" defer></script>' in page.text
    assert "<script>" not in page.text


def test_every_kind_of_answer_carries_the_policy(served: Running) -> None:
    with writer(served.url) as client:
        answers = [
            client.get("/api/health"),
            client.get("/"),
            client.get("/static/live.js"),
            client.get("/static/style.css"),
            client.get("/nowhere"),
            client.delete("/api/jobs/x"),
            client.get("/login"),
            httpx.get(served.url + "/api/jobs", timeout=10),  # 401
        ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 404, 405, 200, 401]
    for answer in answers:
        assert_clean(answer)


def test_the_write_token_never_shows(served: Running) -> None:
    with writer(served.url) as client:
        page = client.get("/")
    assert WRITE not in page.text
    assert WRITE not in str(page.headers)
