"""The collector's ASGI app and the server that runs it (uvicorn, on the anyio event loop)."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from srtd.collector import _api
from srtd.collector._auth import Tokens, check_bind
from srtd.collector._guard import Guard
from srtd.collector._limits import ACCEPT_BATCH, raise_fd_limit, server_settings
from srtd.collector._metrics import metrics
from srtd.collector._store import SchemaTooNew, Store, open_db
from srtd.errors import LaunchError, UsageError


class _App(Starlette):
    """Starlette with `Guard` outermost: its headers and body draining cover every answer, a 500 too."""

    def build_middleware_stack(self) -> ASGIApp:
        return Guard(super().build_middleware_stack())


def create_app(store: Store, tokens: Tokens, extra_routes: list[BaseRoute] | None = None) -> Starlette:
    app = _App(
        routes=[*_api.ROUTES, Route("/metrics", metrics, methods=["GET"]), *(extra_routes or [])],
        exception_handlers={
            _api.ApiError: _api.api_error,
            HTTPException: _api.http_error,
            Exception: _api.internal_error,
        },
    )
    app.state.store = store
    app.state.tokens = tokens
    return app


def open_store(db_path: Path) -> Store:
    try:
        return Store(open_db(db_path))
    except SchemaTooNew as err:
        raise UsageError(f"{db_path}: {err}: use a newer srtd") from None
    except OSError as err:
        raise UsageError(f"{db_path}: cannot open: {err.strerror}") from None
    except Exception as err:  # sqlite3.DatabaseError: not a database, locked, ...
        raise UsageError(f"{db_path}: cannot open the collector's database: {err}") from None


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    for name, level in (("srtd.collector", logging.INFO), ("uvicorn.error", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False


class _Server(uvicorn.Server):
    """Says where it listens once the socket is bound (port 0 picks one).

    Signals are the collector's (`_stop_on_signal`), not uvicorn's: uvicorn would raise a
    captured SIGTERM again once it stopped, ending the process before the demo's jobs
    have had their teardown.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def __init__(self, config: uvicorn.Config, ready: Callable[[str], None] | None) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.ready is not None and self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.ready(f"http://{host}:{port}")


def serve(
    db_path: Path,
    host: str,
    port: int,
    tokens: Tokens,
    *,
    routes: list[BaseRoute] | None = None,
    ready: Callable[[str], None] | None = None,
    beside: Callable[[str], Awaitable[object]] | None = None,
) -> int | None:
    """Listen until SIGINT/SIGTERM; the signal that stopped it.  No access log: request lines
    would be noise at scale.

    `beside(url)`: a task run once the collector listens (the demo's jobs).
    """
    check_bind(host, tokens)
    store = open_store(db_path)
    app = create_app(store, tokens, routes)
    _logging()
    config = _config(app, host, port)
    started = anyio.Event()
    where: list[str] = []

    def announce(url: str) -> None:
        where.append(url)
        started.set()
        if ready is not None:
            ready(url)

    server = _Server(config, announce)
    stopped_by: list[int] = []
    try:
        listening = _bind(host, port)
    except BaseException:
        store.close()
        raise

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, server, stopped_by)
            if beside is not None:

                async def run_beside() -> None:
                    await started.wait()
                    await beside(where[0])

                tg.start_soon(run_beside)
            await server.serve(sockets=[listening])
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        listening.close()
        store.close()
    return stopped_by[0] if stopped_by else None


def _config(app: Starlette, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings: no access log, no lifespan, and the connection limits of `_limits`."""
    limits = server_settings(raise_fd_limit())
    return uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="off", **limits)


async def _stop_on_signal(server: uvicorn.Server, stopped_by: list[int]) -> None:
    """SIGINT or SIGTERM: a graceful stop (open requests finish, then the beside task is cancelled),
    noted in `stopped_by` so that the command exits as a stopped command does (130, 143)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            stopped_by[:1] = [signum]
            server.should_exit = True


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a refusal is one clear line, not uvicorn's exit."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as err:
        raise LaunchError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BATCH)
    except OSError as err:
        sock.close()
        raise LaunchError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    sock.set_inheritable(True)
    return sock
