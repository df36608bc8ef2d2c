"""The signals docs/attach.md sends with `srtd signal` (HUP, SIGUSR1, ...): each toy program
answers with one line and goes on; only SIGTERM and SIGINT stop it."""

from __future__ import annotations

import signal

import pytest

from tests.toy.harness import Toy, get_json, post

pytestmark = pytest.mark.anyio

STATUS = (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


async def test_worker_answers_status_signals_while_loading_and_serving(toy: Toy) -> None:
    worker = await toy.worker("--startup-delay", 1.0)
    await worker.wait_for_line("loading model")
    worker.send(signal.SIGHUP)  # still loading: answered all the same
    await worker.wait_for_line(r"^toy-worker: received SIGHUP, going on: 0 requests so far, 0 in flight$")
    url = await worker.url()
    response = await post(f"{url}/v1/completions", {"model": "toy", "prompt": "hi", "max_tokens": 2})
    assert response.status_code == 200
    for sig in STATUS:
        worker.send(sig)
        await worker.wait_for_line(rf"^toy-worker: received {sig.name}, going on: 1 requests so far, 0 in flight$")
    assert (await get_json(f"{url}/stats"))["requests_total"] == 1  # still serving
    assert await worker.stop(signal.SIGTERM) == 0
    assert worker.lines[-1] == "toy-worker: stopped"


async def test_router_answers_status_signals_and_keeps_routing(toy: Toy) -> None:
    worker = await toy.worker()
    router = await toy.router("--worker", await worker.url())
    url = await router.url()
    await router.wait_for_line("healthy")
    for sig in STATUS:
        router.send(sig)
        await router.wait_for_line(rf"^toy-router: received {sig.name}, going on: 1 of 1 workers healthy$")
    assert (await get_json(f"{url}/workers"))["stats"]["regular_count"] == 1
    response = await post(f"{url}/v1/completions", {"model": "toy", "prompt": "hi", "max_tokens": 2})
    assert response.status_code == 200
    assert await router.stop(signal.SIGTERM) == 0
    assert await worker.stop(signal.SIGTERM) == 0


async def test_bench_answers_status_signals_and_still_succeeds(toy: Toy) -> None:
    # 50 ms a token, 4 tokens, 8 requests one at a time: well over a second of sending.
    worker = await toy.worker(latency_ms=50)
    url = await worker.url()
    bench = await toy.bench("--url", url, "--requests", 8, "--concurrency", 1, "--max-tokens", 4)
    await bench.wait_for_line("requests to")
    for sig in STATUS:
        bench.send(sig)
        await bench.wait_for_line(rf"^toy-bench: received {sig.name}, going on: \d of 8 requests done$")
    assert await bench.wait() == 0, bench.log
    assert bench.lines[-1].startswith("toy-bench: 8/8 requests ok in ")
    assert await worker.stop(signal.SIGTERM) == 0
