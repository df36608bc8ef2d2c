from __future__ import annotations

import json
import re
import signal

import anyio
import httpx
import pytest

from srtd.toy import WORKER_READY_PATTERN
from tests.toy.harness import Toy, free_port, get_json, post, post_stream

pytestmark = pytest.mark.anyio


async def test_port_opens_after_startup_delay_and_ready_is_printed_once(toy: Toy) -> None:
    port = free_port()
    worker = await toy.worker("--role", "decode", "--startup-delay", 1.0, port=port)
    await worker.wait_for_line(r"^toy-worker: loading model toy \(role decode\) \.\.\.$")
    # Still "loading": the port must refuse, so a TCP or HTTP probe cannot pass early.
    with pytest.raises(httpx.ConnectError):
        await get_json(f"http://127.0.0.1:{port}/health")
    assert worker.count("ready on") == 0

    ready = await worker.wait_for_line("ready on")
    assert ready == f"toy-worker: ready on 127.0.0.1:{port}"
    assert re.search(WORKER_READY_PATTERN, ready)
    assert await get_json(f"http://127.0.0.1:{port}/health") == {"status": "ok", "role": "decode"}

    assert await worker.stop(signal.SIGTERM) == 0
    assert worker.count("ready on") == 1
    assert worker.lines[-2:] == ["toy-worker: received SIGTERM, draining", "toy-worker: stopped"]


async def test_models_stats_and_unknown_paths(toy: Toy) -> None:
    worker = await toy.worker("--model", "tiny-llama", "--role", "prefill")
    url = await worker.url()
    models = await get_json(f"{url}/v1/models")
    assert models["object"] == "list"
    assert [(m["id"], m["object"]) for m in models["data"]] == [("tiny-llama", "model")]
    assert await get_json(f"{url}/stats") == {
        "model": "tiny-llama",
        "role": "prefill",
        "requests_total": 0,
        "in_flight": 0,
    }
    missing = await get_json(f"{url}/v1/nothing", expect=404)
    assert missing["error"]["message"] == "Invalid URL (GET /v1/nothing)"
    async with httpx.AsyncClient(trust_env=False) as client:
        wrong_method = await client.get(f"{url}/v1/completions")
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "POST"


async def test_completion_has_openai_shape_and_deterministic_tokens(toy: Toy) -> None:
    url = await (await toy.worker()).url()
    body = {"model": "toy", "prompt": "four words of prompt", "max_tokens": 7}
    first = await post(f"{url}/v1/completions", body)
    assert first.status_code == 200
    doc = first.json()
    assert doc["object"] == "text_completion"
    assert doc["model"] == "toy"
    assert doc["id"].startswith("cmpl-")
    [choice] = doc["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "length"
    assert len(choice["text"].split()) == 7
    assert doc["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}

    again = (await post(f"{url}/v1/completions", body)).json()
    assert again["choices"][0]["text"] == choice["text"]
    assert again["id"] != doc["id"]

    # No limit: the toy "stops naturally" after 16 tokens.
    natural = (await post(f"{url}/v1/completions", {"model": "toy", "prompt": ["one"]})).json()
    assert natural["choices"][0]["finish_reason"] == "stop"
    assert natural["usage"]["completion_tokens"] == 16
    assert len(natural["choices"][0]["text"].split()) == 16


async def test_streamed_completion_matches_unary_and_ends_with_done(toy: Toy) -> None:
    url = await (await toy.worker()).url()
    body = {"model": "toy", "prompt": "stream me", "max_tokens": 5}
    unary = (await post(f"{url}/v1/completions", body)).json()

    response, events = await post_stream(f"{url}/v1/completions", {**body, "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len(chunks) == 6  # five tokens, then the finish chunk
    assert {c["object"] for c in chunks} == {"text_completion"}
    assert len({c["id"] for c in chunks}) == 1
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 5 + ["length"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == unary["choices"][0]["text"]
    assert all("usage" not in c for c in chunks)

    _, events = await post_stream(
        f"{url}/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}}
    )
    *token_chunks, usage_chunk = (json.loads(e) for e in events[:-1])
    assert all(c["usage"] is None for c in token_chunks)
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}


async def test_chat_completion_unary_and_streamed(toy: Toy) -> None:
    url = await (await toy.worker()).url()
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hello toy"}]},
    ]
    # max_completion_tokens, the newer name, wins over max_tokens.
    body = {"model": "toy", "messages": messages, "max_tokens": 50, "max_completion_tokens": 3}
    doc = (await post(f"{url}/v1/chat/completions", body)).json()
    assert doc["object"] == "chat.completion"
    assert doc["id"].startswith("chatcmpl-")
    [choice] = doc["choices"]
    assert choice["message"]["role"] == "assistant"
    assert len(choice["message"]["content"].split()) == 3
    assert choice["finish_reason"] == "length"
    assert doc["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}

    response, events = await post_stream(f"{url}/v1/chat/completions", {**body, "stream": True})
    assert response.status_code == 200
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[-1] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "".join(d.get("content", "") for d in deltas) == choice["message"]["content"]


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/completions", b"{not json", 400, "not valid JSON"),
        ("/v1/completions", b"[1, 2]", 400, "must be a JSON object"),
        ("/v1/completions", b'{"model": "toy"}', 400, "prompt"),
        ("/v1/completions", b'{"model": "toy", "prompt": "x", "max_tokens": 0}', 400, "max_tokens"),
        ("/v1/completions", b'{"model": "toy", "prompt": ["a", "b"]}', 400, "exactly one prompt"),
        ("/v1/completions", b'{"model": "gpt-9", "prompt": "x"}', 404, "gpt-9"),
        ("/v1/chat/completions", b'{"model": "toy", "messages": []}', 400, "messages"),
        ("/v1/chat/completions", b'{"model": "nope", "messages": [{"role": "user"}]}', 404, "nope"),
    ],
)
async def test_bad_requests_get_json_errors(toy: Toy, path: str, body: bytes, status: int, needle: str) -> None:
    url = await (await toy.worker()).url()
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.post(f"{url}{path}", content=body)
    assert response.status_code == status
    assert needle in response.json()["error"]["message"]


async def test_sigterm_lets_a_streaming_request_finish(toy: Toy) -> None:
    worker = await toy.worker(latency_ms=40)
    url = await worker.url()
    body = {"model": "toy", "prompt": "slow", "max_tokens": 10, "stream": True}
    received: list[str] = []
    async with (
        httpx.AsyncClient(trust_env=False, timeout=10) as client,
        client.stream("POST", f"{url}/v1/completions", json=body) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                received.append(line)
                if len(received) == 1:
                    worker.send(signal.SIGTERM)
                    await worker.wait_for_line("received SIGTERM, draining")
    assert received[-1] == "data: [DONE]"
    assert len(received) == 12  # every token, the finish chunk and [DONE]
    assert await worker.wait() == 0
    assert worker.lines[-1] == "toy-worker: stopped"


async def test_sigint_exits_zero_and_sigterm_while_loading_too(toy: Toy) -> None:
    ready = await toy.worker()
    loading = await toy.worker("--startup-delay", 30)
    await ready.port()
    await loading.wait_for_line("loading model")
    assert await ready.stop(signal.SIGINT) == 0
    assert "toy-worker: received SIGINT, draining" in ready.lines
    assert await loading.stop(signal.SIGTERM) == 0
    assert loading.count("ready on") == 0
    assert loading.lines[-1] == "toy-worker: stopped"


async def test_fail_after_and_fail_on_start_exit_with_the_given_code(toy: Toy) -> None:
    crashing = await toy.worker("--fail-after", 0.5, "--exit-code", 3)
    failing = await toy.worker("--fail-on-start", "--exit-code", 7)
    await crashing.port()  # it does come up before it crashes
    assert await failing.wait() == 7
    assert failing.lines == ["toy-worker: failing on start as asked (exit code 7)"]
    assert await crashing.wait() == 3
    assert crashing.lines[-1] == "toy-worker: simulated crash after 0.5 s (exit code 3)"


async def test_port_in_use_exits_one(toy: Toy) -> None:
    first = await toy.worker()
    port = await first.port()
    second = await toy.worker(port=port)
    assert await second.wait() == 1
    assert any(line.startswith(f"toy-worker: cannot listen on 127.0.0.1:{port}") for line in second.lines)
    with anyio.fail_after(5):
        assert await first.stop() == 0
