from __future__ import annotations

import json
import re
import signal
from typing import Any

import httpx
import pytest

from srtd.toy import ROUTER_READY_PATTERN
from tests.toy.harness import Toy, ToyProcess, free_port, get_json, poll, post, post_stream

pytestmark = pytest.mark.anyio


async def counts(router_url: str) -> dict[str, int]:
    doc = await get_json(f"{router_url}/workers")
    return dict(doc["stats"])


async def wait_counts(router_url: str, prefill: int = 0, decode: int = 0, regular: int = 0) -> None:
    want = {"prefill_count": prefill, "decode_count": decode, "regular_count": regular}

    async def reached() -> bool:
        return await counts(router_url) == want

    await poll(reached)


async def stats(worker_url: str) -> Any:
    return (await get_json(f"{worker_url}/stats"))["requests_total"]


async def test_worker_counts_rise_with_health_and_fall_when_one_dies(toy: Toy) -> None:
    p, d1, d2 = free_port(), free_port(), free_port()
    urls = [f"http://127.0.0.1:{port}" for port in (p, d1, d2)]
    router = await toy.router("--prefill", urls[0], "--decode", urls[1], "--decode", urls[2])
    ready = await router.wait_for_line("ready on")
    assert re.search(ROUTER_READY_PATTERN, ready)
    url = await router.url()
    assert router.lines[0] == "toy-router: starting with 1 prefill, 2 decode, 0 regular workers"
    assert await get_json(f"{url}/health") == {"status": "ok"}

    doc = await get_json(f"{url}/workers")
    assert doc == {
        "workers": [
            {"url": urls[0], "worker_type": "prefill", "is_healthy": False},
            {"url": urls[1], "worker_type": "decode", "is_healthy": False},
            {"url": urls[2], "worker_type": "decode", "is_healthy": False},
        ],
        "total": 3,
        "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 0},
    }

    await toy.worker("--role", "prefill", port=p)
    await wait_counts(url, prefill=1)
    await router.wait_for_line(rf"^toy-router: worker {urls[0]} healthy \(prefill\)$")
    first_decode = await toy.worker("--role", "decode", port=d1)
    await toy.worker("--role", "decode", port=d2)
    await wait_counts(url, prefill=1, decode=2)

    first_decode.process.kill()
    await first_decode.wait()
    await wait_counts(url, prefill=1, decode=1)
    await router.wait_for_line(rf"^toy-router: worker {urls[1]} unhealthy \(decode\): ")
    doc = await get_json(f"{url}/workers")
    assert [w["is_healthy"] for w in doc["workers"]] == [True, False, True]

    assert await router.stop(signal.SIGTERM) == 0
    assert router.lines[-2:] == ["toy-router: received SIGTERM, stopping", "toy-router: stopped"]
    assert router.count("ready on") == 1


async def start_pd(toy: Toy) -> tuple[ToyProcess, str, str, list[str]]:
    prefill = await toy.worker("--role", "prefill")
    decodes = [await toy.worker("--role", "decode") for _ in range(2)]
    prefill_url = await prefill.url()
    decode_urls = [await d.url() for d in decodes]
    router = await toy.router("--prefill", prefill_url, *(x for u in decode_urls for x in ("--decode", u)))
    url = await router.url()
    await wait_counts(url, prefill=1, decode=2)
    return router, url, prefill_url, decode_urls


async def test_pd_mode_prefills_then_decodes_round_robin(toy: Toy) -> None:
    _, url, prefill_url, decode_urls = await start_pd(toy)
    body = {"model": "toy", "prompt": "through the router", "max_tokens": 6}
    served_by = []
    for _ in range(4):
        response = await post(f"{url}/v1/completions", body)
        assert response.status_code == 200, response.text
        assert response.headers["x-srtd-prefill"] == prefill_url
        served_by.append(response.headers["x-srtd-worker"])
        doc = response.json()
        # The decode worker's answer, not the one-token prefill pass.
        assert doc["usage"]["completion_tokens"] == 6
        assert doc["choices"][0]["finish_reason"] == "length"
    assert served_by == [decode_urls[0], decode_urls[1], decode_urls[0], decode_urls[1]]
    assert await stats(prefill_url) == 4
    assert [await stats(u) for u in decode_urls] == [2, 2]

    response, events = await post_stream(f"{url}/v1/chat/completions", {
        "model": "toy",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
    })  # fmt: skip
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == 4
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"

    models = await get_json(f"{url}/v1/models")
    assert [m["id"] for m in models["data"]] == ["toy"]

    # An error from the prefill pass (here: an unknown model) reaches the client as is.
    unknown = await post(f"{url}/v1/completions", {**body, "model": "other"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    bad = await post(f"{url}/v1/completions", {"model": "toy"})
    assert bad.status_code == 400


async def test_regular_mode_round_robins_and_streams(toy: Toy) -> None:
    workers = [await toy.worker() for _ in range(2)]
    worker_urls = [await w.url() for w in workers]
    router = await toy.router("--worker", worker_urls[0], "--worker", worker_urls[1])
    url = await router.url()
    await wait_counts(url, regular=2)
    served_by = []
    for _ in range(4):
        response = await post(f"{url}/v1/completions", {"model": "toy", "prompt": "x", "max_tokens": 2})
        assert response.status_code == 200
        served_by.append(response.headers["x-srtd-worker"])
    assert served_by == worker_urls * 2

    response, events = await post_stream(
        f"{url}/v1/completions", {"model": "toy", "prompt": "x", "max_tokens": 3, "stream": True}
    )
    assert response.status_code == 200
    assert events[-1] == "[DONE]"
    assert len(events) == 5  # three tokens, the finish chunk, [DONE]


async def test_a_worker_that_refuses_is_skipped_before_its_next_health_check(toy: Toy) -> None:
    workers = [await toy.worker() for _ in range(2)]
    worker_urls = [await w.url() for w in workers]
    # One health check at start, then none for a minute: only the failover can notice.
    router = await toy.router("--worker", worker_urls[0], "--worker", worker_urls[1], "--health-interval", 60)
    url = await router.url()
    await wait_counts(url, regular=2)
    workers[0].process.kill()
    await workers[0].wait()
    for _ in range(2):
        response = await post(f"{url}/v1/completions", {"model": "toy", "prompt": "x", "max_tokens": 1})
        assert response.status_code == 200
        assert response.headers["x-srtd-worker"] == worker_urls[1]
    await router.wait_for_line(rf"^toy-router: worker {worker_urls[0]} unhealthy \(regular\): ConnectError")
    assert await counts(url) == {"prefill_count": 0, "decode_count": 0, "regular_count": 1}


async def test_no_healthy_worker_means_503(toy: Toy) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with_dead = await toy.router("--prefill", dead, "--decode", f"http://127.0.0.1:{free_port()}")
    without_any = await toy.router()
    for router in (with_dead, without_any):
        url = await router.url()
        assert await get_json(f"{url}/health") == {"status": "ok"}
        for path in ("/v1/completions", "/v1/chat/completions"):
            response = await post(f"{url}{path}", {"model": "toy", "prompt": "x"})
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "no_healthy_workers"
        models = await get_json(f"{url}/v1/models", expect=503)
        assert models["error"]["code"] == "no_healthy_workers"
    assert (await get_json(f"{await with_dead.url()}/workers"))["total"] == 2
    assert await get_json(f"{await without_any.url()}/workers") == {
        "workers": [],
        "total": 0,
        "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 0},
    }
    async with httpx.AsyncClient(trust_env=False) as client:
        bad = await client.post(f"{await without_any.url()}/v1/completions", content=b"nope")
    assert bad.status_code == 400
    assert await with_dead.stop(signal.SIGINT) == 0
    assert await without_any.stop(signal.SIGTERM) == 0


async def test_only_a_prefill_worker_cannot_serve(toy: Toy) -> None:
    prefill_url = await (await toy.worker("--role", "prefill")).url()
    router = await toy.router("--prefill", prefill_url, "--decode", f"http://127.0.0.1:{free_port()}")
    url = await router.url()
    await wait_counts(url, prefill=1)
    # /v1/models is what clients poll for readiness: it must not say "ready" either.
    await get_json(f"{url}/v1/models", expect=503)
    response = await post(f"{url}/v1/completions", {"model": "toy", "prompt": "x"})
    assert response.status_code == 503


async def test_bad_worker_url_is_a_usage_error(toy: Toy) -> None:
    router = await toy.start("router", "--port", 0, "--decode", "localhost:3000")
    assert await router.wait() == 2
    assert "not an http:// URL" in router.log
    twice = await toy.start("router", "--port", 0, "--worker", "http://a:1", "--decode", "http://a:1/")
    assert await twice.wait() == 2
    assert "given more than once: http://a:1" in twice.log
