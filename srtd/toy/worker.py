"""The toy inference worker: ``python -m srtd.toy.worker --port PORT [...]``.

It behaves like an OpenAI-compatible engine as far as a supervisor can tell: it takes a
while to "load the model" before its port opens, prints a readiness line once, answers
completions with deterministic fake tokens at a simulated per-token latency, drains on
SIGTERM, and can be told to crash for restart demos.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import click

from srtd.toy import _openai as oai
from srtd.toy._http import App, HttpError, HttpServer, Request, Response, StreamResponse, json_response, sse_event
from srtd.toy._proc import STOP_SIGNALS, Say, StopRequest, answer_status_signals, crash, seconds_option
from srtd.toy._tokens import count_tokens, generate

Role = Literal["prefill", "decode", "agg"]


@dataclass(frozen=True)
class WorkerConfig:
    port: int
    host: str = "127.0.0.1"
    model: str = "toy"
    role: Role = "agg"
    startup_delay: float = 0.0
    token_latency_ms: float = 5.0
    fail_after: float | None = None
    exit_code: int = 1
    fail_on_start: bool = False
    drain_timeout: float = 5.0


class ToyWorker:
    """The HTTP endpoints of one worker, and the counters `/stats` reports."""

    def __init__(self, config: WorkerConfig, say: Callable[[str], None]) -> None:
        self.config = config
        self.created = oai.now()
        self.requests_total = 0
        self.in_flight = 0
        self.app = App(say)
        self.app.route("GET", "/health")(self.health)
        self.app.route("GET", "/v1/models")(self.models)
        self.app.route("GET", "/stats")(self.stats)
        self.app.route("POST", "/v1/completions")(self.completions)
        self.app.route("POST", "/v1/chat/completions")(self.chat_completions)

    async def health(self, request: Request) -> Response:
        # The port only opens once the model is "loaded", so answering at all means ready.
        return json_response({"status": "ok", "role": self.config.role})

    async def models(self, request: Request) -> Response:
        return json_response({"object": "list", "data": [oai.model_card(self.config.model, self.created)]})

    async def stats(self, request: Request) -> Response:
        """Counters for demos and tests: which worker did the router really use?"""
        return json_response(
            {
                "model": self.config.model,
                "role": self.config.role,
                "requests_total": self.requests_total,
                "in_flight": self.in_flight,
            }
        )

    def status(self) -> str:
        """What a status signal (SIGHUP, SIGUSR1, SIGUSR2) gets said: the `/stats` counters."""
        return f"{self.requests_total} requests so far, {self.in_flight} in flight"

    def _check_model(self, model: str) -> None:
        if model != self.config.model:
            raise HttpError(404, f"The model `{model}` does not exist.", code="model_not_found", param="model")

    async def _tokens(self, prompt: str, count: int) -> AsyncIterator[str]:
        delay = self.config.token_latency_ms / 1000.0
        for piece in generate(prompt, count):
            await anyio.sleep(delay)  # the simulated cost of one forward pass
            yield piece

    async def completions(self, request: Request) -> Response | StreamResponse:
        return await self._generate(request, oai.COMPLETIONS)

    async def chat_completions(self, request: Request) -> Response | StreamResponse:
        return await self._generate(request, oai.CHAT)

    async def _generate(self, request: Request, api: oai.Api) -> Response | StreamResponse:
        body = oai.parse(api.request, request.json())
        self._check_model(body.model)
        prompt = body.prompt_text
        count, finish = body.budget()
        header = {
            "id": oai.new_id(api.id_prefix),
            "object": api.chunk_object if body.stream else api.object,
            "created": oai.now(),
            "model": body.model,
        }
        if body.stream:
            return StreamResponse(
                self._stream(
                    body,
                    prompt,
                    header,
                    first=None if api.opening is None else api.choice(api.opening, None),
                    piece=lambda text: api.choice(api.piece(text), None),
                    last=api.choice(api.closing, finish),
                )
            )
        text = await self._run(prompt, count)
        usage = oai.usage(count_tokens(prompt), count)
        return json_response({**header, "choices": [api.choice(api.whole(text), finish)], "usage": usage})

    async def _run(self, prompt: str, count: int) -> str:
        self.requests_total += 1
        self.in_flight += 1
        try:
            return "".join([piece async for piece in self._tokens(prompt, count)])
        finally:
            self.in_flight -= 1

    async def _stream(
        self,
        body: oai.CompletionRequest | oai.ChatRequest,
        prompt: str,
        header: dict[str, Any],
        *,
        first: dict[str, Any] | None,
        piece: Callable[[str], dict[str, Any]],
        last: dict[str, Any],
    ) -> AsyncGenerator[bytes, None]:
        """The SSE body shared by both APIs; they differ only in the shape of a choice."""
        count, _ = body.budget()
        # With include_usage, OpenAI puts `"usage": null` on every chunk and the totals
        # on one extra chunk with no choices, just before [DONE].
        extra: dict[str, Any] = {"usage": None} if body.include_usage else {}
        self.requests_total += 1
        self.in_flight += 1
        try:
            if first is not None:
                yield sse_event({**header, "choices": [first], **extra})
            async for text in self._tokens(prompt, count):
                yield sse_event({**header, "choices": [piece(text)], **extra})
            yield sse_event({**header, "choices": [last], **extra})
            if body.include_usage:
                yield sse_event({**header, "choices": [], "usage": oai.usage(count_tokens(prompt), count)})
            yield oai.STREAM_DONE
        finally:
            self.in_flight -= 1


async def run_worker(config: WorkerConfig) -> int:
    """Run one worker until a stop signal; returns the process exit code."""
    say = Say("toy-worker")
    if config.fail_on_start:
        say(f"failing on start as asked (exit code {config.exit_code})")
        crash(config.exit_code)
    started = time.monotonic()
    worker = ToyWorker(config, say)
    server = HttpServer(worker.app)
    stop = StopRequest()
    exit_code = 0

    async def crash_later(after: float) -> None:
        await anyio.sleep(max(0.0, after - (time.monotonic() - started)))
        say(f"simulated crash after {after:g} s (exit code {config.exit_code})")
        crash(config.exit_code)

    # Signals are caught before the (simulated) model load so that a SIGTERM while
    # loading still ends in an orderly exit 0, as it would for a real engine.
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop.watch, signals)
            await tg.start(answer_status_signals, say, worker.status)
            if config.fail_after is not None:
                tg.start_soon(crash_later, config.fail_after)
            say(f"loading model {config.model} (role {config.role}) ...")
            with anyio.move_on_after(config.startup_delay):
                await stop.requested.wait()
            if stop.requested.is_set():
                say(f"received {stop.signal_name}, draining")
            else:
                exit_code = await server.run_until_stopped(config, stop, say, tg, stopping="draining")
            say("stopped" if exit_code == 0 else "failed")
            tg.cancel_scope.cancel()
    return exit_code


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    required=True,
    help="Port to listen on; 0 picks a free one (the ready line names it).",
)
@click.option("--model", default="toy", show_default=True, help="Served model name.")
@click.option(
    "--role",
    type=click.Choice(["prefill", "decode", "agg"]),
    default="agg",
    show_default=True,
    help="Role reported on /health; every role serves completions alike.",
)
@seconds_option("--startup-delay", 0.0, "Simulated model load: the port opens only after this long.")
@click.option(
    "--token-latency-ms",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Simulated time per generated token.",
)
@seconds_option("--fail-after", None, "Crash with --exit-code this long after the process starts.")
@click.option(
    "--exit-code",
    type=click.IntRange(0, 255),
    default=1,
    show_default=True,
    help="Exit code of a simulated crash.",
)
@click.option("--fail-on-start", is_flag=True, help="Exit with --exit-code at once.")
@seconds_option("--drain-timeout", 5.0, "On SIGTERM/SIGINT, how long requests in flight may take to finish.")
def main(**options: Any) -> None:
    """A fake OpenAI-compatible inference engine for demos and tests (no GPU needed)."""
    # click's parameter names are WorkerConfig's fields
    raise SystemExit(anyio.run(run_worker, WorkerConfig(**options)))


if __name__ == "__main__":
    main()
