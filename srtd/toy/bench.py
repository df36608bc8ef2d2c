"""The toy benchmark client: ``python -m srtd.toy.bench --url http://HOST:PORT [...]``.

It sends `--requests` completions with at most `--concurrency` in flight, checks every
answer (status, shape, the closing ``[DONE]`` of a stream), and reports time to first
token, latency and output throughput.  Any failed request makes it exit 1, so a job
whose benchmark is its terminal step fails when serving is broken.

It targets any OpenAI-compatible server, not just the toy one.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import click
import httpx

from srtd.toy._proc import Say, answer_status_signals, seconds_option

Endpoint = Literal["completions", "chat"]
_PATHS: dict[Endpoint, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_READY_POLL_SECONDS = 0.2
_ERROR_SAMPLES = 5


@dataclass(frozen=True)
class BenchConfig:
    url: str
    model: str | None = None
    requests: int = 20
    concurrency: int = 4
    max_tokens: int = 16
    stream: bool = True
    endpoint: Endpoint = "completions"
    prompt: str = "Tell me about supervising serving jobs on Slurm"
    output: Path | None = None
    wait_ready: float | None = None
    timeout: float = 60.0


@dataclass(frozen=True)
class Outcome:
    """One request's fate.  `ttft` is the time to the first generated text (for a
    request that is not streamed, the whole latency: nothing arrives earlier)."""

    ok: bool
    latency: float
    ttft: float | None = None
    output_tokens: int = 0
    error: str | None = None


def base_url(url: str) -> str:
    """The server root: OpenAI clients are often given ``.../v1``; accept both spellings."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def percentile(values: list[float], q: float) -> float:
    """The `q`-th percentile with linear interpolation between ranks (numpy's default)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution_ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"avg": None, "p50": None, "p99": None}
    ms = [v * 1000.0 for v in values]
    return {
        "avg": round(sum(ms) / len(ms), 3),
        "p50": round(percentile(ms, 50), 3),
        "p99": round(percentile(ms, 99), 3),
    }


def _error_message(response: httpx.Response) -> str:
    try:
        detail = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = response.text[:200]
    return f"HTTP {response.status_code}: {detail}"


def _text_of(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return str(choice.get("text") or "")
    return str((choice.get("delta") or {}).get("content") or "")


class Progress:
    """How far the bench is, for the line a status signal (SIGHUP, ...) gets."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done: int | None = None  # None: no request sent yet

    def status(self) -> str:
        if self.done is None:
            return "no request sent yet"
        return f"{self.done} of {self.total} requests done"


class Bench:
    def __init__(self, config: BenchConfig, client: httpx.AsyncClient, model: str, progress: Progress) -> None:
        self.config = config
        self.client = client
        self.model = model
        self.progress = progress

    def body(self, index: int) -> dict[str, Any]:
        # A distinct prompt per request: a real server could otherwise answer from a cache.
        prompt = f"{self.config.prompt} (request {index})"
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.config.max_tokens}
        if self.config.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if self.config.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    async def one(self, index: int) -> Outcome:
        path = _PATHS[self.config.endpoint]
        start = time.perf_counter()
        try:
            if self.config.stream:
                return await self._streamed(path, self.body(index), start)
            return await self._unary(path, self.body(index), start)
        except httpx.HTTPError as exc:
            return Outcome(False, time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            # A server that answers nonsense fails the request, never the whole bench.
            return Outcome(False, time.perf_counter() - start, error=f"malformed response: {exc!r}")

    async def _unary(self, path: str, body: dict[str, Any], start: float) -> Outcome:
        response = await self.client.post(path, json=body)
        latency = time.perf_counter() - start
        if response.status_code != 200:
            return Outcome(False, latency, error=_error_message(response))
        try:
            document = response.json()
            choice = document["choices"][0]
            text = choice["text"] if "text" in choice else choice["message"]["content"]
            tokens = int(document["usage"]["completion_tokens"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return Outcome(False, latency, error=f"malformed response: {exc!r}")
        if not isinstance(text, str):
            return Outcome(False, latency, error="malformed response: the choice has no text")
        return Outcome(True, latency, ttft=latency, output_tokens=tokens)

    async def _streamed(self, path: str, body: dict[str, Any], start: float) -> Outcome:
        ttft: float | None = None
        pieces = 0
        usage_tokens: int | None = None
        async with self.client.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                return Outcome(False, time.perf_counter() - start, error=_error_message(response))
            done = False
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line.removeprefix("data:").strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    event = json.loads(data)
                except json.JSONDecodeError:
                    return Outcome(False, time.perf_counter() - start, error=f"bad event: {data[:100]}")
                if "error" in event:
                    message = (event["error"] or {}).get("message", event["error"])
                    return Outcome(False, time.perf_counter() - start, error=f"error event: {message}")
                for choice in event.get("choices") or []:
                    if _text_of(choice):
                        pieces += 1
                        if ttft is None:
                            ttft = time.perf_counter() - start
                if event.get("usage"):
                    usage_tokens = int(event["usage"]["completion_tokens"])
        latency = time.perf_counter() - start
        if not done:
            return Outcome(False, latency, ttft, error="stream ended without data: [DONE]")
        # The server's own count wins; counting text events is the fallback for
        # servers that ignore stream_options.
        tokens = usage_tokens if usage_tokens is not None else pieces
        return Outcome(True, latency, ttft, tokens)

    async def run(self) -> tuple[list[Outcome], float]:
        outcomes: list[Outcome | None] = [None] * self.config.requests
        indices = iter(range(self.config.requests))

        async def lane() -> None:
            # Each lane takes the next request number when it is free: at most
            # `concurrency` requests are in flight, and none waits behind a slow one.
            for index in indices:
                outcomes[index] = await self.one(index)
                self.progress.done = (self.progress.done or 0) + 1

        start = time.perf_counter()
        self.progress.done = 0
        async with anyio.create_task_group() as tg:
            for _ in range(min(self.config.concurrency, self.config.requests)):
                tg.start_soon(lane)
        duration = time.perf_counter() - start
        return [o for o in outcomes if o is not None], duration


async def list_models(client: httpx.AsyncClient) -> list[str]:
    """The model ids the server lists; RuntimeError when it answers anything else."""
    response = await client.get("/v1/models")
    if response.status_code != 200:
        raise RuntimeError(_error_message(response))
    try:
        return [str(card["id"]) for card in response.json()["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"malformed /v1/models answer: {exc!r}") from None


async def wait_ready(client: httpx.AsyncClient, seconds: float) -> tuple[list[str], str]:
    """Poll /v1/models until it lists a model; returns (models, "") or ([], last error)."""
    last = "no answer yet"
    with anyio.move_on_after(seconds):
        while True:
            try:
                models = await list_models(client)
                if models:
                    return models, ""
                last = "/v1/models lists no model yet"
            except (httpx.HTTPError, RuntimeError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            await anyio.sleep(_READY_POLL_SECONDS)
    return [], last


def summarize(
    config: BenchConfig, model: str, outcomes: list[Outcome], duration: float, failure: str | None
) -> dict[str, Any]:
    good = [o for o in outcomes if o.ok]
    errors = [o.error or "unknown error" for o in outcomes if not o.ok]
    tokens = sum(o.output_tokens for o in good)
    return {
        "url": config.url,
        "endpoint": _PATHS[config.endpoint],
        "model": model,
        "stream": config.stream,
        "concurrency": config.concurrency,
        "max_tokens": config.max_tokens,
        "requests": len(outcomes),
        "succeeded": len(good),
        "errors": len(errors),
        "error_samples": list(dict.fromkeys(errors))[:_ERROR_SAMPLES],  # distinct, in order
        "failure": failure,
        "duration_s": round(duration, 4),
        "ttft_ms": distribution_ms([o.ttft for o in good if o.ttft is not None]),
        "latency_ms": distribution_ms([o.latency for o in good]),
        # time per output token after the first: what a streaming user waits per token
        "tpot_ms": distribution_ms(
            [(o.latency - o.ttft) / (o.output_tokens - 1) for o in good if o.ttft is not None and o.output_tokens > 1]
        ),
        "output_tokens": tokens,
        "output_tokens_per_s": round(tokens / duration, 3) if duration > 0 else None,
        "requests_per_s": round(len(good) / duration, 3) if duration > 0 else None,
    }


def _fmt(dist: dict[str, float | None]) -> str:
    if dist["avg"] is None:
        return "n/a"
    return f"avg {dist['avg']:.1f} p50 {dist['p50']:.1f} p99 {dist['p99']:.1f}"


async def run_bench(config: BenchConfig) -> int:
    """Run the benchmark; returns 0 when every request succeeded, else 1."""
    say = Say("toy-bench")
    progress = Progress(config.requests)
    async with anyio.create_task_group() as tg:
        await tg.start(answer_status_signals, say, progress.status)
        code = await _bench(config, say, progress)
        tg.cancel_scope.cancel()
    return code


async def _bench(config: BenchConfig, say: Say, progress: Progress) -> int:
    """The benchmark itself: wait for the server, send the requests, report."""
    url = base_url(config.url)
    failure: str | None = None
    outcomes: list[Outcome] = []
    duration = 0.0
    model = config.model or "toy"
    async with httpx.AsyncClient(
        base_url=url,
        timeout=config.timeout,
        limits=httpx.Limits(max_connections=config.concurrency + 1),
        trust_env=False,  # a cluster's http_proxy must not capture node-local traffic
    ) as client:
        models: list[str] = []
        if config.wait_ready is not None:
            say(f"waiting up to {config.wait_ready:g} s for {url}/v1/models")
            models, why = await wait_ready(client, config.wait_ready)
            if not models:
                failure = f"{url} not ready after {config.wait_ready:g} s: {why}"
        elif config.model is None:
            try:
                models = await list_models(client)
            except (httpx.HTTPError, RuntimeError) as exc:
                say(f"could not list models ({type(exc).__name__}: {exc}); using model 'toy'")
        if config.model is None and models:
            model = models[0]
        if failure is None:
            mode = "stream" if config.stream else "no-stream"
            say(
                f"{config.requests} requests to {url}{_PATHS[config.endpoint]} (model {model}, "
                f"concurrency {config.concurrency}, max_tokens {config.max_tokens}, {mode})"
            )
            outcomes, duration = await Bench(config, client, model, progress).run()
            failed = [o for o in outcomes if not o.ok]
            if failed:
                failure = f"{len(failed)}/{len(outcomes)} requests failed; first error: {failed[0].error}"

    results = summarize(config, model, outcomes, duration, failure)
    if config.output is not None:
        config.output.parent.mkdir(parents=True, exist_ok=True)
        config.output.write_text(json.dumps(results, indent=2) + "\n")
    if outcomes:
        say(
            f"{results['succeeded']}/{results['requests']} requests ok in {duration:.2f} s; "
            f"ttft ms {_fmt(results['ttft_ms'])}; latency ms {_fmt(results['latency_ms'])}; "
            f"{results['output_tokens_per_s'] or 0:.1f} output tok/s"
        )
    if config.output is not None:
        say(f"results written to {config.output}")
    if failure is not None:
        say(f"FAILED: {failure}")
        return 1
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", required=True, help="Server base URL, e.g. http://127.0.0.1:30000 (a /v1 suffix is fine).")
@click.option("--model", default=None, help="Model name; by default the first one /v1/models lists.")
@click.option(
    "--requests", "num_requests", type=click.IntRange(min=1), default=20, show_default=True, help="Requests to send."
)
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="Requests in flight at most."
)
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=16, show_default=True, help="Output tokens per request."
)
@click.option("--stream/--no-stream", default=True, show_default=True, help="Server-sent events, or whole answers.")
@click.option(
    "--endpoint",
    type=click.Choice(["completions", "chat"]),
    default="completions",
    show_default=True,
    help="/v1/completions or /v1/chat/completions.",
)
@click.option(
    "--prompt", default=BenchConfig.prompt, show_default=True, help="Prompt text (a request number is appended)."
)
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write JSON results here."
)
@seconds_option("--wait-ready", None, "First poll /v1/models until it lists a model, for up to this long.")
@click.option(
    "--timeout", type=click.FloatRange(min=0.01), default=60.0, show_default=True, help="Per-request timeout."
)
def main(*, num_requests: int, **options: Any) -> None:
    """Benchmark an OpenAI-compatible server; exit 1 if any request fails."""
    # the other parameters' names are BenchConfig's fields
    raise SystemExit(anyio.run(run_bench, BenchConfig(requests=num_requests, **options)))


if __name__ == "__main__":
    main()
