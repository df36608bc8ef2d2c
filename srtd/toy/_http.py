"""A tiny HTTP/1.1 server on anyio and h11, shared by the toy worker and router.

h11 owns the protocol (framing, keep-alive, chunked encoding, malformed input); this
module only moves bytes between it and an anyio socket and maps requests to handlers.
It supports just what an OpenAI-compatible toy needs: small request bodies, JSON
responses, and streamed responses (server-sent events) of unknown length.

Shutdown is a drain, the way a serving engine should behave under SIGTERM: stop
accepting, close idle keep-alive connections at once, let requests in flight finish for
a grace period, then cancel whatever is left.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol

import anyio
import anyio.abc
import h11

from srtd.toy._proc import Say, StopRequest, format_address

#: Request bodies larger than this are refused with 413; the toy never needs more, and a
#: bound keeps a misbehaving client from growing our memory without limit.
MAX_BODY_BYTES = 1 << 20
_RECEIVE_SIZE = 64 * 1024
_SERVER_HEADER = ("server", "srtd-toy")


class HttpError(Exception):
    """Raised by a handler to answer with an OpenAI-style JSON error document."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param

    def response(self) -> Response:
        return error_response(self.status, self.message, type=self.type, code=self.code, param=self.param)


@dataclass(frozen=True)
class Request:
    """One HTTP request, with its whole body read."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON, or an HttpError 400 that says why it is not."""
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HttpError(400, f"request body is not valid JSON: {exc}") from None


@dataclass
class Response:
    """A response whose body is known up front."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class StreamResponse:
    """A response whose body is produced while it is sent (server-sent events).

    `chunks` is iterated and each piece sent as it comes.  The server always closes
    `chunks` (if it is an async generator) and then awaits `close`, whether the body
    was sent in full, cut short by the client, or never started: that is how a proxy
    releases its upstream connection even when its generator never ran.
    """

    chunks: AsyncIterator[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: list[tuple[str, str]] = field(default_factory=list)
    close: Callable[[], Awaitable[None]] | None = None


Handler = Callable[[Request], Awaitable[Response | StreamResponse]]


def json_response(obj: Any, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json.dumps(obj).encode(), headers=list(headers or []))


def error_response(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> Response:
    """The OpenAI error document, so OpenAI clients show our message as they would theirs."""
    return json_response({"error": {"message": message, "type": type, "param": param, "code": code}}, status=status)


def sse_event(obj: Any) -> bytes:
    """One server-sent event carrying `obj` as JSON."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class App:
    """Routes `(method, path)` to handlers; unknown paths get 404, wrong methods 405."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._routes: dict[str, dict[str, Handler]] = {}
        self.log = log

    def route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._routes.setdefault(path, {})[method.upper()] = handler
            return handler

        return register

    async def dispatch(self, request: Request) -> Response | StreamResponse:
        methods = self._routes.get(request.path)
        if methods is None:
            return error_response(404, f"Invalid URL ({request.method} {request.path})", code="not_found")
        handler = methods.get(request.method)
        if handler is None:
            allowed = ", ".join(sorted(methods))
            response = error_response(
                405, f"method {request.method} not allowed on {request.path}", code="method_not_allowed"
            )
            response.headers.append(("allow", allowed))
            return response
        try:
            return await handler(request)
        except HttpError as exc:
            return exc.response()
        except Exception as exc:
            # A bug in a handler must cost one request, not the connection or the server.
            self.log(f"internal error on {request.method} {request.path}: {exc!r}")
            traceback.print_exc()
            return error_response(500, f"internal error: {exc!r}", type="internal_error")


def _head(status: int, headers: list[tuple[str, str]]) -> h11.Response:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""  # a status we have no name for (relayed by the router) is still valid
    return h11.Response(status_code=status, headers=headers, reason=reason)


@dataclass(eq=False)
class _Connection:
    scope: anyio.CancelScope
    busy: bool = False  # between a request's first byte and its response's last


class Listening(Protocol):
    """Where a toy listens and how long it drains: the part of its config `HttpServer` reads."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def drain_timeout(self) -> float: ...


class HttpServer:
    """Serves an `App` on one TCP address.

    Use: ``port = await server.bind(host, port)`` (the port accepts from here on),
    run ``server.serve()`` in a task, later ``await server.shutdown(grace)``; `serve`
    returns once every connection is closed.
    """

    def __init__(self, app: App) -> None:
        self._app = app
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        self._accept_scope = anyio.CancelScope()
        self._accept_stopped = anyio.Event()
        self._connections: set[_Connection] = set()
        self._all_closed = anyio.Event()
        self._draining = False

    async def bind(self, host: str, port: int) -> int:
        """Open the listening socket; returns the bound port (port 0 picks a free one)."""
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        self._listener = listener
        return listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(self) -> None:
        if self._listener is None:
            raise RuntimeError("HttpServer.serve() called before bind()")
        listener = self._listener
        async with anyio.create_task_group() as connections:
            try:
                with self._accept_scope:
                    await listener.serve(self._handle, connections)
            finally:
                # Closing the socket here (not in shutdown) keeps the close in the task
                # that accepts, and turns new connection attempts into "refused" while
                # the connections already accepted drain.
                with anyio.CancelScope(shield=True):
                    await listener.aclose()
                self._accept_stopped.set()

    async def run_until_stopped(
        self,
        config: Listening,
        stop: StopRequest,
        say: Say,
        tg: anyio.abc.TaskGroup,
        *,
        stopping: str,
        on_ready: Callable[[], None] = lambda: None,
    ) -> int:
        """Listen, serve in `tg` until `stop` is requested, then drain: the toys' life.

        Returns 1 when the address cannot be had (said in one line), else 0.  `on_ready`
        runs once the port accepts, before the ready line that probes wait for.
        """
        host, port = config.host, config.port
        try:
            bound = await self.bind(host, port)
        except OSError as exc:
            say(f"cannot listen on {format_address(host, port)}: {exc}")
            return 1
        tg.start_soon(self.serve)
        on_ready()
        say(f"ready on {format_address(host, bound)}")
        await stop.requested.wait()
        say(f"received {stop.signal_name}, {stopping}")
        await self.shutdown(config.drain_timeout, abort=stop.again)
        return 0

    async def shutdown(self, grace: float, abort: anyio.Event | None = None) -> None:
        """Stop accepting, drain requests in flight for up to `grace` seconds, then cut.

        Setting `abort` (a second Ctrl-C) ends the grace period early.
        """
        self._draining = True
        self._accept_scope.cancel()
        await self._accept_stopped.wait()
        for conn in list(self._connections):
            if not conn.busy:
                conn.scope.cancel()  # an idle keep-alive connection has nothing to finish
        self._check_all_closed()

        async def abort_early() -> None:
            if abort is not None:
                await abort.wait()
                waiting.cancel_scope.cancel()

        with anyio.move_on_after(grace):
            async with anyio.create_task_group() as waiting:
                waiting.start_soon(abort_early)
                await self._all_closed.wait()
                waiting.cancel_scope.cancel()
        for conn in list(self._connections):
            conn.scope.cancel()

    def _check_all_closed(self) -> None:
        if self._draining and not self._connections:
            self._all_closed.set()

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        conn = _Connection(anyio.CancelScope())
        self._connections.add(conn)
        try:
            with conn.scope:
                async with stream:
                    await self._serve_connection(stream, conn)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            pass  # the client went away mid-response; nothing to tell it
        except Exception as exc:
            # An exception escaping a connection handler would take the whole server
            # down with it (it runs in the server's task group).
            self._app.log(f"connection error: {exc!r}")
        finally:
            self._connections.discard(conn)
            self._check_all_closed()

    async def _serve_connection(self, stream: anyio.abc.SocketStream, conn: _Connection) -> None:
        h = h11.Connection(h11.SERVER, max_incomplete_event_size=_RECEIVE_SIZE)
        while True:
            try:
                request = await self._read_request(h, stream, conn)
            except h11.RemoteProtocolError as exc:
                if h.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    status = exc.error_status_hint
                    await self._send_response(h, stream, error_response(status, f"bad request: {exc}"))
                return
            except HttpError as exc:
                # Refused before the body was read (too large): answer and hang up,
                # since the unread rest of the body would be taken for the next request.
                await self._send_response(h, stream, exc.response(), close=True)
                return
            if request is None:
                return
            response = await self._app.dispatch(request)
            await self._send_response(h, stream, response, close=self._draining)
            conn.busy = False
            if self._draining or h.our_state is h11.MUST_CLOSE:
                return
            try:
                h.start_next_cycle()
            except h11.LocalProtocolError:
                return  # the client has not finished its request; do not guess, hang up

    async def _read_request(
        self, h: h11.Connection, stream: anyio.abc.SocketStream, conn: _Connection
    ) -> Request | None:
        event = await self._next_event(h, stream)
        if not isinstance(event, h11.Request):
            return None  # ConnectionClosed: the client ended a keep-alive connection
        conn.busy = True
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise HttpError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        if h.they_are_waiting_for_100_continue:
            # curl holds back bodies over 1 KiB for a second unless told to go on.
            await self._send(h, stream, h11.InformationalResponse(status_code=100, headers=[]))
        body = bytearray()
        while True:
            part = await self._next_event(h, stream)
            if isinstance(part, h11.Data):
                body += part.data
                if len(body) > MAX_BODY_BYTES:
                    raise HttpError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
            elif isinstance(part, h11.EndOfMessage):
                break
            else:
                return None
        target = event.target.decode("latin-1")
        path, _, query = target.partition("?")
        return Request(event.method.decode("ascii").upper(), path, query, headers, bytes(body))

    async def _next_event(self, h: h11.Connection, stream: anyio.abc.SocketStream) -> Any:
        while True:
            event = h.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await stream.receive(_RECEIVE_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""  # h11 reads an empty chunk as end of input
            h.receive_data(data)

    async def _send(self, h: h11.Connection, stream: anyio.abc.SocketStream, event: Any) -> None:
        data = h.send(event)
        if data:
            await stream.send(data)

    async def _send_response(
        self,
        h: h11.Connection,
        stream: anyio.abc.SocketStream,
        response: Response | StreamResponse,
        *,
        close: bool = False,
    ) -> None:
        headers = [("content-type", response.content_type), _SERVER_HEADER, *response.headers]
        if close:
            headers.append(("connection", "close"))
        if isinstance(response, Response):
            headers.append(("content-length", str(len(response.body))))
            await self._send(h, stream, _head(response.status, headers))
            if response.body:
                await self._send(h, stream, h11.Data(data=response.body))
            await self._send(h, stream, h11.EndOfMessage())
            return
        # No content-length: h11 frames the body with chunked encoding for HTTP/1.1
        # clients, and by closing the connection for HTTP/1.0 ones.
        headers.append(("cache-control", "no-cache"))
        try:
            await self._send(h, stream, _head(response.status, headers))
            async for chunk in response.chunks:
                if chunk:
                    await self._send(h, stream, h11.Data(data=chunk))
            await self._send(h, stream, h11.EndOfMessage())
        finally:
            with anyio.CancelScope(shield=True):
                if isinstance(response.chunks, AsyncGenerator):
                    await response.chunks.aclose()
                if response.close is not None:
                    await response.close()
