from __future__ import annotations

import socket
from dataclasses import replace
from typing import Any

import httpx
import pytest

from srtd.supervisor import check, count, evaluate_workers
from srtd.unit import Count, FileProbe, HttpProbe, TcpProbe, WorkerCountProbe
from tests.supervisor.helpers import free_port

DYNAMO = {
    "instances": [
        {"endpoint": "generate", "component": "prefill"},
        {"endpoint": "generate", "component": "prefill"},
        {"endpoint": "generate", "component": "decode"},
        {"endpoint": "generate", "component": "tensorrt_llm"},
        {"endpoint": "clear_kv_blocks", "component": "decode"},
    ]
}
ROUTER = {"workers": [], "stats": {"prefill_count": 2, "decode_count": 1, "regular_count": 3}}

DYNAMO_PROBE = WorkerCountProbe(
    node="n",
    port=8000,
    path="/health",
    prefill=(Count(items="instances", where={"endpoint": "generate", "component": "prefill"}),),
    decode=(Count(items="instances", where={"endpoint": "generate", "component": ["decode", "tensorrt_llm"]}),),
    expect_prefill=2,
    expect_decode=2,
)


def test_count_rules() -> None:
    assert count(ROUTER, Count(field="stats.prefill_count")) == 2
    assert count(ROUTER, Count(field="stats.missing")) == 0
    assert count(ROUTER, Count(field="workers")) == 0  # not a number
    assert count(DYNAMO, Count(items="instances")) == 5
    assert count(DYNAMO, Count(items="instances", where={"component": "decode"})) == 2
    assert (
        count({"w": [{"is_healthy": True}, {"is_healthy": False}]}, Count(items="w", where={"is_healthy": "true"})) == 1
    )
    assert count({"a": {"b": [1, 2]}}, Count(items="a.b")) == 2
    assert count([], Count(items="x")) == 0


def test_evaluate_workers() -> None:
    assert evaluate_workers(DYNAMO_PROBE, DYNAMO).ok
    short = evaluate_workers(replace(DYNAMO_PROBE, expect_decode=3), DYNAMO)
    assert not short.ok
    assert short.detail == "prefill 2/2, decode 2/3"
    router = WorkerCountProbe(
        node="n",
        port=1,
        path="/workers",
        prefill=(Count(field="stats.prefill_count"),),
        decode=(Count(field="stats.decode_count"), Count(field="stats.regular_count")),
        expect_prefill=2,
        expect_decode=4,
    )
    assert evaluate_workers(router, ROUTER).ok
    assert not evaluate_workers(router, {"workers": []}).ok


def _client(handler: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), trust_env=False)


@pytest.mark.anyio
async def test_http_probe_wants_the_status() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(503 if len(seen) == 1 else 200)

    probe = HttpProbe(node="n", port=8080, path="/health")
    async with _client(handler) as client:
        first = await check(probe, host="10.9.8.7", client=client)
        second = await check(probe, host="10.9.8.7", client=client)
    assert (first.ok, first.detail) == (False, "HTTP 503 (want 200)")
    assert second.ok
    assert seen == ["http://10.9.8.7:8080/health"] * 2


@pytest.mark.anyio
async def test_worker_probe_over_http() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000  # a RecursionError in the job's task, before
    bodies = iter([b"not json", b'{"instances": []}', httpx.ConnectError("refused"), deep, DYNAMO])

    def handler(request: httpx.Request) -> httpx.Response:
        body = next(bodies)
        if isinstance(body, Exception):
            raise body
        if isinstance(body, bytes):
            return httpx.Response(200, content=body)
        return httpx.Response(200, json=body)

    async with _client(handler) as client:
        results = [await check(DYNAMO_PROBE, host="h", client=client) for _ in range(5)]
    assert [r.ok for r in results] == [False, False, False, False, True]
    assert results[0].detail.startswith("body is not JSON")
    assert results[3].detail.startswith("body is not JSON: '[[[[")
    assert results[1].detail == "prefill 0/2, decode 0/2"
    assert "ConnectError" in results[2].detail


@pytest.mark.anyio
async def test_tcp_probe_against_a_real_socket() -> None:
    port = free_port()
    probe = TcpProbe(node="n", port=port)
    async with httpx.AsyncClient() as client:
        refused = await check(probe, host="127.0.0.1", client=client)
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen()
            accepted = await check(probe, host="127.0.0.1", client=client)
    assert not refused.ok
    assert "refused" in refused.detail.lower()
    assert accepted.ok


@pytest.mark.anyio
async def test_file_probe_passes_once_the_file_exists(tmp_path: Any) -> None:
    marker = tmp_path / "store" / "node1.ready"
    probe = FileProbe(node="node1", path=str(marker))
    async with httpx.AsyncClient() as client:
        before = await check(probe, host="127.0.0.1", client=client)
        marker.parent.mkdir()
        marker.write_text("")
        after = await check(probe, host="127.0.0.1", client=client)
    assert (before.ok, before.detail) == (False, "no such file yet")
    assert (after.ok, after.detail) == (True, "file exists")
