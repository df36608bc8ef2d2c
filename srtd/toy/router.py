"""The toy router: ``python -m srtd.toy.router --port PORT --prefill URL --decode URL [...]``.

A small gateway in the style of the SGLang model gateway (sglang-router).  It checks
every worker's ``GET /health`` in the background, one task per worker, and reports them
on ``GET /workers`` with counts of the *healthy* ones, so a readiness gate that counts
workers means "can serve", not merely "was configured".

Routing: with a healthy prefill and a healthy decode worker, a request is first sent to
a prefill worker with ``max_tokens: 1`` (standing in for the KV-cache prefill) and then
to a decode worker, whose answer (streamed or not) goes back to the client.  Otherwise
requests go round-robin over the healthy regular workers, and without any, 503.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import click
import httpx

from srtd.toy._http import App, HttpError, HttpServer, Request, Response, StreamResponse, json_response, sse_event
from srtd.toy._proc import STOP_SIGNALS, Say, StopRequest, answer_status_signals, seconds_option

WorkerType = Literal["prefill", "decode", "regular"]
#: Header naming the worker that produced a response (the decode worker in PD mode).
WORKER_HEADER = "x-srtd-worker"
#: Header naming the prefill worker a PD request went through.
PREFILL_HEADER = "x-srtd-prefill"


@dataclass(eq=False)
class Worker:
    url: str
    worker_type: WorkerType
    is_healthy: bool = False

    def describe(self) -> dict[str, Any]:
        return {"url": self.url, "worker_type": self.worker_type, "is_healthy": self.is_healthy}


@dataclass(frozen=True)
class RouterConfig:
    port: int
    host: str = "127.0.0.1"
    prefill: tuple[str, ...] = ()
    decode: tuple[str, ...] = ()
    regular: tuple[str, ...] = ()
    health_interval: float = 0.5
    health_timeout: float = 1.0
    request_timeout: float = 300.0
    drain_timeout: float = 5.0


@dataclass
class _Rotation:
    """Round-robin start positions, one per worker type."""

    next: dict[WorkerType, int] = field(default_factory=dict)

    def order(self, kind: WorkerType, workers: Sequence[Worker]) -> list[Worker]:
        """`workers` starting at this type's turn; the rest follow, as fallbacks."""
        start = self.next.get(kind, 0) % len(workers)
        self.next[kind] = start + 1
        return [*workers[start:], *workers[:start]]


class NoWorkerError(Exception):
    """Every candidate refused the connection."""


class ToyRouter:
    def __init__(self, config: RouterConfig, say: Callable[[str], None], client: httpx.AsyncClient) -> None:
        self.config = config
        self.say = say
        self.client = client
        self.workers = [
            *(Worker(url, "prefill") for url in config.prefill),
            *(Worker(url, "decode") for url in config.decode),
            *(Worker(url, "regular") for url in config.regular),
        ]
        self._rotation = _Rotation()
        self.app = App(say)
        self.app.route("GET", "/health")(self.health)
        self.app.route("GET", "/workers")(self.list_workers)
        self.app.route("GET", "/v1/models")(self.models)
        self.app.route("POST", "/v1/completions")(self.generate)
        self.app.route("POST", "/v1/chat/completions")(self.generate)

    # ------------------------------------------------------------------ health

    def status(self) -> str:
        """What a status signal (SIGHUP, SIGUSR1, SIGUSR2) gets said: the workers' health."""
        healthy = sum(w.is_healthy for w in self.workers)
        return f"{healthy} of {len(self.workers)} workers healthy"

    def healthy(self, kind: WorkerType) -> list[Worker]:
        return [w for w in self.workers if w.worker_type == kind and w.is_healthy]

    def set_health(self, worker: Worker, healthy: bool, reason: str = "") -> None:
        """Record a worker's health, logging only changes (a flapping worker stays visible)."""
        if healthy == worker.is_healthy:
            return
        worker.is_healthy = healthy
        if healthy:
            self.say(f"worker {worker.url} healthy ({worker.worker_type})")
        else:
            self.say(f"worker {worker.url} unhealthy ({worker.worker_type}): {reason}")

    async def check(self, worker: Worker) -> None:
        try:
            response = await self.client.get(f"{worker.url}/health", timeout=self.config.health_timeout)
        except httpx.HTTPError as exc:
            self.set_health(worker, False, f"{type(exc).__name__}: {exc}")
        else:
            ok = response.status_code == 200
            self.set_health(worker, ok, "" if ok else f"GET /health answered {response.status_code}")

    async def watch_health(self, worker: Worker) -> None:
        """One loop per worker, so a worker that hangs its probe delays no other."""
        while True:
            await self.check(worker)
            await anyio.sleep(self.config.health_interval)

    # ------------------------------------------------------------------ endpoints

    async def health(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def list_workers(self, request: Request) -> Response:
        return json_response(
            {
                "workers": [w.describe() for w in self.workers],
                "total": len(self.workers),
                "stats": {
                    "prefill_count": len(self.healthy("prefill")),
                    "decode_count": len(self.healthy("decode")),
                    "regular_count": len(self.healthy("regular")),
                },
            }
        )

    async def models(self, request: Request) -> Response | StreamResponse:
        # Answered only when a completion could be routed too: clients (the bench's
        # --wait-ready among them) take a model list as "ready to serve", and a
        # prefill worker alone cannot serve.
        prefill, decode = self.healthy("prefill"), self.healthy("decode")
        if prefill and decode:
            candidates = [*self._rotation.order("decode", decode), *prefill]
        else:
            candidates = self.healthy("regular")
        if not candidates:
            raise self._unavailable()
        response, _ = await self._send(candidates, "GET", request.path, None)
        return await _buffered(response)

    async def generate(self, request: Request) -> Response | StreamResponse:
        payload = request.json()
        if not isinstance(payload, dict):
            raise HttpError(400, "request body must be a JSON object")
        prefill, decode = self.healthy("prefill"), self.healthy("decode")
        if prefill and decode:
            return await self._disaggregated(request, payload, prefill, decode)
        regular = self.healthy("regular")
        if not regular:
            raise self._unavailable()
        response, worker = await self._send(
            self._rotation.order("regular", regular), "POST", request.path, request.body
        )
        return await self._relay(response, payload, worker, [(WORKER_HEADER, worker.url)])

    async def _disaggregated(
        self, request: Request, payload: dict[str, Any], prefill: list[Worker], decode: list[Worker]
    ) -> Response | StreamResponse:
        # The prefill pass: one token, never streamed.  Its answer is discarded unless it
        # is an error (a bad body or an unknown model), which the client must see as is.
        prefill_payload = {**payload, "max_tokens": 1, "stream": False}
        prefill_payload.pop("max_completion_tokens", None)
        prefill_payload.pop("stream_options", None)
        first, prefill_worker = await self._send(
            self._rotation.order("prefill", prefill),
            "POST",
            request.path,
            json.dumps(prefill_payload).encode(),
        )
        prefill_answer = await _buffered(first, [(PREFILL_HEADER, prefill_worker.url)])
        if prefill_answer.status != 200:
            return prefill_answer
        response, decode_worker = await self._send(
            self._rotation.order("decode", decode), "POST", request.path, request.body
        )
        headers = [(WORKER_HEADER, decode_worker.url), (PREFILL_HEADER, prefill_worker.url)]
        return await self._relay(response, payload, decode_worker, headers)

    def _unavailable(self) -> HttpError:
        return HttpError(
            503,
            "no healthy workers: need a healthy prefill and a healthy decode worker, or a healthy regular worker",
            type="service_unavailable",
            code="no_healthy_workers",
        )

    async def _send(
        self, candidates: list[Worker], method: str, path: str, body: bytes | None
    ) -> tuple[httpx.Response, Worker]:
        """Send to the first candidate that accepts the connection.

        Only connection failures move on to the next worker: the request never reached
        the failed one, so retrying cannot run it twice.  Such a worker is marked
        unhealthy at once rather than at its next health check.
        """
        for worker in candidates:
            outgoing = self.client.build_request(
                method,
                f"{worker.url}{path}",
                content=body,
                headers={"content-type": "application/json"} if body is not None else None,
            )
            try:
                return await self.client.send(outgoing, stream=True), worker
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                self.set_health(worker, False, f"{type(exc).__name__}: {exc}")
            except httpx.HTTPError as exc:
                raise HttpError(
                    502, f"worker {worker.url} failed: {type(exc).__name__}: {exc}", type="bad_gateway"
                ) from None
        raise self._unavailable()

    async def _relay(
        self,
        response: httpx.Response,
        payload: dict[str, Any],
        worker: Worker,
        headers: list[tuple[str, str]],
    ) -> Response | StreamResponse:
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        if not (payload.get("stream") and response.status_code == 200 and streamed):
            return await _buffered(response, headers)
        return StreamResponse(
            self._chunks(response, worker.url),
            status=response.status_code,
            headers=headers,
            close=response.aclose,
        )

    async def _chunks(self, response: httpx.Response, url: str) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            # The client has its 200 already; an error event (and no [DONE]) is the only
            # way left to tell it the answer is incomplete.
            self.say(f"worker {url} failed mid-stream: {type(exc).__name__}: {exc}")
            yield sse_event({"error": {"message": f"worker {url} failed mid-stream", "type": "bad_gateway"}})


async def _buffered(response: httpx.Response, headers: list[tuple[str, str]] | None = None) -> Response:
    try:
        body = await response.aread()
    except httpx.HTTPError as exc:
        raise HttpError(502, f"worker failed: {type(exc).__name__}: {exc}", type="bad_gateway") from None
    finally:
        await response.aclose()
    content_type = response.headers.get("content-type", "application/json")
    return Response(response.status_code, body, content_type=content_type, headers=list(headers or []))


async def run_router(config: RouterConfig) -> int:
    """Run the router until a stop signal; returns the process exit code."""
    say = Say("toy-router")
    stop = StopRequest()
    # trust_env=False: an http_proxy variable (common on clusters) must not send
    # node-local traffic through a proxy.  No connection cap: the toy is the bottleneck.
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(config.request_timeout, connect=config.health_timeout),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        trust_env=False,
    )
    router = ToyRouter(config, say, client)
    server = HttpServer(router.app)
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with client, anyio.create_task_group() as tg:
            tg.start_soon(stop.watch, signals)
            await tg.start(answer_status_signals, say, router.status)
            counts = {kind: sum(w.worker_type == kind for w in router.workers) for kind in ("prefill", "decode")}
            say(
                f"starting with {counts['prefill']} prefill, {counts['decode']} decode, "
                f"{len(router.workers) - sum(counts.values())} regular workers"
            )

            def watch_workers() -> None:
                for worker in router.workers:
                    tg.start_soon(router.watch_health, worker)

            exit_code = await server.run_until_stopped(
                config, stop, say, tg, stopping="stopping", on_ready=watch_workers
            )
            say("stopped" if exit_code == 0 else "failed")
            tg.cancel_scope.cancel()
    return exit_code


def _worker_urls(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    urls = []
    for value in values:
        url = value.rstrip("/")
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise click.BadParameter(f"{value!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise click.BadParameter(f"{value!r} is not an http:// URL such as http://127.0.0.1:30001")
        urls.append(url)
    return tuple(urls)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), required=True, help="Port to listen on; 0 picks a free one.")
@click.option("--prefill", multiple=True, callback=_worker_urls, metavar="URL", help="A prefill worker (repeatable).")
@click.option("--decode", multiple=True, callback=_worker_urls, metavar="URL", help="A decode worker (repeatable).")
@click.option(
    "--worker",
    multiple=True,
    callback=_worker_urls,
    metavar="URL",
    help="A regular (aggregated) worker (repeatable).",
)
@seconds_option("--health-interval", 0.5, "Time between two health checks of one worker.", minimum=0.01)
@seconds_option(
    "--health-timeout", 1.0, "A health check (and a connection attempt) slower than this fails.", minimum=0.01
)
@seconds_option("--request-timeout", 300.0, "Longest wait for a worker's next bytes.", minimum=0.01)
@seconds_option("--drain-timeout", 5.0, "On SIGTERM/SIGINT, how long requests in flight may take to finish.")
def main(*, prefill: tuple[str, ...], decode: tuple[str, ...], worker: tuple[str, ...], **options: Any) -> None:
    """A toy OpenAI-compatible router for prefill/decode or regular toy workers."""
    everything = [*prefill, *decode, *worker]
    duplicates = sorted({url for url in everything if everything.count(url) > 1})
    if duplicates:
        raise click.UsageError(f"worker URL given more than once: {', '.join(duplicates)}")
    # the other parameters' names are RouterConfig's fields
    config = RouterConfig(prefill=prefill, decode=decode, regular=worker, **options)
    raise SystemExit(anyio.run(run_router, config))


if __name__ == "__main__":
    main()
