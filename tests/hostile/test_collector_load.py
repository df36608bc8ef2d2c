"""`srtd collector` under a crowd: idle and half-sent connections, and a job of 4000 units.

Real uvicorn servers; the bounds on time are generous (a loaded 2-core machine), and each
would be broken many times over by the old behaviour (no answer at all, or 16 s).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from srtd.collector._journal_view import TIMELINE_UNITS
from srtd.collector._limits import HEADER_SECONDS
from tests.collector.helpers import Running, collector, collector_env
from tests.hostile.collector_server import few_fds

pytestmark = pytest.mark.slow
ANSWER_WITHIN = 5.0  # seconds: an idle server answers in milliseconds


@pytest.fixture
def crowded(tmp_path: Path) -> Iterator[Running]:
    """A collector allowed 384 open files: a crowd of 400 connections would exhaust them."""
    with collector(tmp_path / "c.db", preexec_fn=lambda: few_fds(384)) as running:
        yield running


def open_crowd(url: str, count: int) -> list[socket.socket]:
    """Connections that send nothing (even) or half a request head (odd), held open."""
    host, port = url.removeprefix("http://").split(":")
    crowd = []
    for i in range(count):
        sock = socket.create_connection((host, int(port)), timeout=10)
        if i % 2:
            sock.sendall(b"GET /api/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        crowd.append(sock)
    return crowd


def timed_get(url: str) -> tuple[int, float]:
    start = time.monotonic()
    answer = httpx.get(url, timeout=60)
    return answer.status_code, time.monotonic() - start


def test_a_request_is_answered_while_hundreds_of_connections_idle_or_dawdle(crowded: Running) -> None:
    crowd = open_crowd(crowded.url, 400)
    try:
        code, took = timed_get(crowded.url + "/api/health")
        assert code == 200
        assert took < ANSWER_WITHIN
        code, took = timed_get(crowded.url + "/api/jobs")
        assert (code, took < ANSWER_WITHIN) == (200, True)
    finally:
        for sock in crowd:
            sock.close()
    assert "Too many open files" not in crowded.stderr.read_text()


def test_half_sent_request_heads_are_closed_after_the_header_deadline(tmp_path: Path) -> None:
    with collector(tmp_path / "c.db") as running:
        silent, dawdling = open_crowd(running.url, 2)
        start = time.monotonic()
        for sock in (silent, dawdling):
            sock.settimeout(HEADER_SECONDS + 20)
            assert sock.recv(1024) == b""  # the server closed it
            sock.close()
        assert time.monotonic() - start < HEADER_SECONDS + 20


def big_journal(units: int) -> list[dict[str, Any]]:
    names = [f"w{i}" for i in range(units)]
    head = {
        "seq": 1,
        "ts": 1_800_000_000.0,
        "state": "starting",
        "detail": {"job": "big", "job_id": "big", "units": names, "nodes": dict.fromkeys(names, "node0")},
    }
    events = [head]
    for i, name in enumerate(names):
        ts = 1_800_000_001.0 + i / 1000
        events.append({"seq": len(events) + 1, "ts": ts, "unit": name, "state": "starting", "attempt": 0})
        events.append({"seq": len(events) + 1, "ts": ts + 0.5, "unit": name, "state": "ready", "attempt": 0})
    events.append({"seq": len(events) + 1, "ts": 1_800_000_010.0, "state": "running"})
    return events


def test_the_api_answers_while_the_page_of_a_4000_unit_job_is_drawn(tmp_path: Path) -> None:
    with collector(tmp_path / "c.db", env=collector_env()) as running, httpx.Client(base_url=running.url) as client:
        events = big_journal(4000)
        for start in range(0, len(events), 200):
            answer = client.post("/api/srtd/jobs/big/journal", json={"events": events[start : start + 200]}, timeout=60)
            assert answer.status_code == 200, answer.text
        page: list[httpx.Response] = []
        drawing = threading.Thread(target=lambda: page.append(httpx.get(running.url + "/jobs/big", timeout=300)))
        drawing.start()
        waits = []
        while drawing.is_alive() and len(waits) < 20:
            code, took = timed_get(running.url + "/api/jobs")
            assert code == 200
            waits.append(took)
            time.sleep(0.2)
        drawing.join(timeout=300)
    assert waits
    assert max(waits) < ANSWER_WITHIN, waits
    (answer,) = page
    assert answer.status_code == 200
    assert f"the timeline draws the first {TIMELINE_UNITS} of 4000 units" in answer.text
    assert answer.text.count('<span class="unit-state unit-ready">') == 4000  # the table has every unit
