from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest

from srtd.toy._http import App, HttpServer, Request, Response, StreamResponse, json_response, sse_event
from srtd.toy.bench import percentile
from tests.toy.harness import Toy, free_port

pytestmark = pytest.mark.anyio


async def test_bench_waits_for_a_pd_stack_and_succeeds(toy: Toy, tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    prefill_url, decode_url, router_url = (f"http://127.0.0.1:{p}" for p in ports)
    output = tmp_path / "results" / "bench.json"
    # Everything at once, as srtd would start it if there were no gates: the bench's
    # --wait-ready must hold back until the router can route (the decode loads slowly).
    bench = await toy.bench(
        "--url", f"{router_url}/v1", "--requests", 12, "--concurrency", 3, "--max-tokens", 5,
        "--wait-ready", 10, "--output", output,
    )  # fmt: skip
    await toy.router("--prefill", prefill_url, "--decode", decode_url, port=ports[2])
    await toy.worker("--role", "prefill", port=ports[0])
    await toy.worker("--role", "decode", "--startup-delay", 0.5, port=ports[1])

    assert await bench.wait() == 0, bench.log
    results = json.loads(output.read_text())
    assert results["requests"] == 12
    assert results["succeeded"] == 12
    assert results["errors"] == 0
    assert results["failure"] is None
    assert results["model"] == "toy"
    assert results["stream"] is True
    assert results["output_tokens"] == 60
    assert results["output_tokens_per_s"] > 0
    for key in ("ttft_ms", "latency_ms"):
        dist = results[key]
        assert 0 < dist["p50"] <= dist["p99"]
        assert dist["avg"] > 0
    assert results["ttft_ms"]["p50"] <= results["latency_ms"]["p50"]
    assert any(line.startswith("toy-bench: 12/12 requests ok in ") for line in bench.lines)
    assert not any("FAILED" in line for line in bench.lines)


async def test_bench_unary_chat_against_a_worker(toy: Toy, tmp_path: Path) -> None:
    url = await (await toy.worker("--model", "m1")).url()
    output = tmp_path / "r.json"
    bench = await toy.bench(
        "--url", url, "--no-stream", "--endpoint", "chat", "--requests", 5, "--max-tokens", 3,
        "--output", output,
    )  # fmt: skip
    assert await bench.wait() == 0, bench.log
    results = json.loads(output.read_text())
    assert (results["model"], results["endpoint"], results["stream"]) == ("m1", "/v1/chat/completions", False)
    assert (results["succeeded"], results["output_tokens"]) == (5, 15)
    assert results["ttft_ms"] == results["latency_ms"]  # nothing arrives before the whole answer


async def test_bench_against_a_dead_url_exits_one_and_says_why(toy: Toy, tmp_path: Path) -> None:
    output = tmp_path / "dead.json"
    bench = await toy.bench("--url", f"http://127.0.0.1:{free_port()}", "--requests", 3, "--output", output)
    assert await bench.wait() == 1
    results = json.loads(output.read_text())
    assert (results["requests"], results["succeeded"], results["errors"]) == (3, 0, 3)
    assert results["error_samples"] == ["ConnectError: All connection attempts failed"]
    assert results["latency_ms"] == {"avg": None, "p50": None, "p99": None}
    assert bench.lines[-1] == (
        "toy-bench: FAILED: 3/3 requests failed; first error: ConnectError: All connection attempts failed"
    )


async def test_bench_wait_ready_gives_up(toy: Toy, tmp_path: Path) -> None:
    output = tmp_path / "late.json"
    url = f"http://127.0.0.1:{free_port()}"
    bench = await toy.bench("--url", url, "--wait-ready", 0.3, "--output", output)
    assert await bench.wait() == 1
    assert bench.lines[-1].startswith(f"toy-bench: FAILED: {url} not ready after 0.3 s: ConnectError")
    results = json.loads(output.read_text())
    assert results["requests"] == 0
    assert results["failure"].startswith(f"{url} not ready after 0.3 s")


async def test_bench_counts_http_errors_as_failures(toy: Toy) -> None:
    url = await (await toy.worker()).url()
    bench = await toy.bench("--url", url, "--model", "missing", "--requests", 2)
    assert await bench.wait() == 1
    assert "first error: HTTP 404: The model `missing` does not exist." in bench.lines[-1]


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0], 99) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0
    assert percentile(list(map(float, range(101))), 99) == 99.0


async def test_bench_fails_on_truncated_streams_and_malformed_answers(toy: Toy) -> None:
    """A server that answers 200 with the wrong thing must not pass the benchmark."""
    app = App(print)

    async def models(request: Request) -> Response:
        return json_response({"object": "list", "data": [{"id": "broken", "object": "model"}]})

    async def truncated(request: Request) -> StreamResponse:
        async def chunks() -> AsyncGenerator[bytes, None]:
            yield sse_event({"choices": [{"index": 0, "text": "hi", "finish_reason": None}]})

        return StreamResponse(chunks())  # no [DONE]: the answer was cut

    async def malformed(request: Request) -> Response:
        return json_response({"choices": []})

    app.route("GET", "/v1/models")(models)
    app.route("POST", "/v1/completions")(truncated)
    app.route("POST", "/v1/chat/completions")(malformed)
    server = HttpServer(app)
    url = f"http://127.0.0.1:{await server.bind('127.0.0.1', 0)}"
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        cut = await toy.bench("--url", url, "--requests", 2)
        bad = await toy.bench("--url", url, "--requests", 2, "--endpoint", "chat", "--no-stream")
        assert await cut.wait() == 1
        assert cut.lines[-1] == (
            "toy-bench: FAILED: 2/2 requests failed; first error: stream ended without data: [DONE]"
        )
        assert await bad.wait() == 1
        assert "first error: malformed response: IndexError" in bad.lines[-1]
        await server.shutdown(1.0)
