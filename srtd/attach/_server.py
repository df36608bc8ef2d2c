"""The attach server: a job's live state and control verbs on a private Unix socket.

`serve(job)` is a supervisor `Service`: it binds `<runtime dir>/<job id>.sock` (0600 in
a 0700 directory; a stale socket left by a killed srtd is replaced, a live one is not),
writes `attach.json` into the log directory, serves clients while the job runs, and
removes both when the job has ended and its clients have had their last events.

Every client is one task; nothing a client does (not reading, sending garbage, sending
a line of a gigabyte) reaches the job.  A client's replies wait in its own bounded
queue (`_connection.ClientConnection`), filled without waiting (`offer`); its
subscription is a place in the journal's event list that its writer walks.  The job's
only cost per event is one wake-up of `_notify`, which then nudges every subscriber's
writer (each event is serialised once, for all of them) and drops a subscriber that is
more than `limit` events behind, or whose queue is full, with a final `overflow` message.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from srtd import __version__
from srtd.attach._connection import ClientConnection, peer_credentials, request_lines
from srtd.attach._paths import is_live, private_dir, socket_path, write_pointer
from srtd.attach._protocol import (
    MAX_REQUEST,
    PROTOCOL,
    BadRequest,
    Request,
    encode,
    error,
    event_message,
    parse_request,
    snapshot_message,
)
from srtd.errors import AttachError, ControlError
from srtd.events import FINAL_JOB_STATES, Event
from srtd.runtime import runtime_dir
from srtd.supervisor import Journal, read_tail

if TYPE_CHECKING:
    from srtd.supervisor import ServicePort

QUEUE_SIZE = 1000  # messages a client may fall behind before it is dropped
DRAIN_SECONDS = 2.0  # after the job ended: how long clients get to read their last events


class AttachServer:
    def __init__(self, job: ServicePort, path: Path, *, queue_size: int = QUEUE_SIZE) -> None:
        self.job = job
        self.path = path
        self.queue_size = queue_size
        self.clients: set[ClientConnection] = set()
        self.subscribers: set[ClientConnection] = set()
        self._journal: Journal | None = None
        self._new_events = anyio.Event()
        self._lines: list[bytes] = []  # event_message of journal.events[i]
        self.refused = 0

    # ---------------------------------------------------------------- the journal

    def journal(self) -> Journal:
        """The job's journal, with our fan-out listening (the job creates it as it starts)."""
        journal = self.job.journal
        if journal is not self._journal:
            journal.listen(self._on_event)
            self._journal = journal
        return journal

    def _on_event(self, event: Event) -> None:
        # The job's own path: O(1), one wake-up.  The fan-out runs in `_notify`, a
        # task of its own, after the job's task that emitted the event has moved on.
        self._new_events.set()

    async def _notify(self) -> None:
        while True:
            await self._new_events.wait()
            self._new_events = anyio.Event()
            if self._journal is None:
                continue
            head = len(self._journal.events)
            for client in list(self.subscribers):
                if client.lag(head) > client.limit:
                    client.drop()
                    self.subscribers.discard(client)
                else:
                    client.nudge()

    def event_lines(self, start: int, stop: int) -> list[bytes]:
        """The protocol lines of journal events [start, stop), each serialised once."""
        assert self._journal is not None
        events = self._journal.events
        while len(self._lines) < stop:
            self._lines.append(event_message(events[len(self._lines)].to_line()))
        return self._lines[start:stop]

    def _extras(self) -> dict[str, Any]:
        plan = self.job.plan
        phases: dict[str, list[str]] = {p: [] for p in plan.phases}
        for unit in plan.units:
            phases.setdefault(unit.phase, []).append(unit.name)
        return {"phases": phases, "log_dir": str(self.job.log_dir), "socket": str(self.path), "pid": os.getpid()}

    def hello(self) -> dict[str, Any]:
        view = self.job.journal.view
        return {
            "type": "hello",
            "protocol": PROTOCOL,
            "srtd": __version__,
            "job_id": self.job.plan.job_id,
            "name": self.job.plan.name,
            "state": view.state.value,
            "started": view.started_at,
            "log_dir": str(self.job.log_dir),
            "socket": str(self.path),
            "pid": os.getpid(),
        }

    # ---------------------------------------------------------------- connections

    async def serve(self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError:  # EMFILE and friends: back off, keep serving
                await anyio.sleep(0.1)
                continue
            tg.start_soon(self._connection, stream)

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                pid, uid, _ = peer_credentials(stream)
            except OSError:
                return
            if uid != os.getuid():
                self.refused += 1
                message = f"refused: job {self.job.plan.job_id} belongs to uid {os.getuid()}, and you are uid {uid}"
                with anyio.move_on_after(1), contextlib.suppress(Exception):
                    await stream.send(encode(error("refused", message)))
                return
            client = ClientConnection(self, stream, self.queue_size, pid)
            self.clients.add(client)
            try:
                with client.scope:
                    async with anyio.create_task_group() as tg:
                        client.tasks = tg
                        tg.start_soon(client.write)
                        client.reply(self.hello())
                        async for line in request_lines(stream):
                            self._request(client, line, tg)
                        client.reading = False
                        client.maybe_finish()
            except Exception as e:  # a bug in one connection must not touch the job
                print(f"srtd: attach: connection error: {type(e).__name__}: {e}", file=sys.stderr)
            finally:
                self.clients.discard(client)
                self.subscribers.discard(client)
                client.done.set()

    def _request(self, client: ClientConnection, line: bytes | None, tg: anyio.abc.TaskGroup) -> None:
        if line is None:
            client.reply(error("too-long", f"request longer than {MAX_REQUEST} bytes"))
            return
        try:
            request = parse_request(line)
        except BadRequest as e:
            client.reply(error("bad-request", str(e)))
            return
        try:
            self._dispatch(client, request, tg)
        except ControlError as e:
            client.reply(error("refused", str(e), request.id))

    def _dispatch(self, client: ClientConnection, request: Request, tg: anyio.abc.TaskGroup) -> None:
        job = self.job
        reply = _with_id({"type": "ok", "cmd": request.cmd}, request.id)
        if request.cmd == "snapshot":
            journal = self.journal()
            client.reply(_with_id(snapshot_message(journal.view, list(job.units), **self._extras()), request.id))
        elif request.cmd == "subscribe":
            self._subscribe(client, request)
        elif request.cmd == "tail":
            self._tail(client, request, tg)
        elif request.cmd == "stop":
            job.request_stop(f"stop requested through srtd attach (pid {client.pid})")
            client.reply(reply)
        elif request.cmd == "restart":
            assert request.unit is not None
            job.request_restart(request.unit)
            client.reply({**reply, "unit": request.unit})
        elif request.cmd == "signal":
            assert request.signal is not None
            signum = _signal_number(request.signal)
            tg.start_soon(self._signal, client, request, signum, reply)

    async def _signal(self, client: ClientConnection, request: Request, signum: int, reply: dict[str, Any]) -> None:
        assert request.unit is not None
        try:
            await self.job.signal_unit(request.unit, signum)
        except ControlError as e:
            client.reply(error("refused", str(e), request.id))
        except OSError as e:
            client.reply(error("failed", f"cannot signal {request.unit}: {e}", request.id))
        else:
            client.reply({**reply, "unit": request.unit, "signal": signal.Signals(signum).name})

    def _subscribe(self, client: ClientConnection, request: Request) -> None:
        journal = self.journal()
        view = journal.view
        start = view.seq if request.from_seq is None else request.from_seq
        if start > view.seq:
            raise ControlError(f"from_seq {start} is ahead of the journal (seq {view.seq})")
        if client.cursor is not None:
            raise ControlError("already subscribed on this connection")
        # One synchronous step: the snapshot and the place in the journal from which
        # the events follow, so nothing falls between them and nothing comes twice.
        if not client.offer(
            encode(_with_id(snapshot_message(view, list(self.job.units), **self._extras()), request.id))
        ):
            return
        client.follow_journal(journal, start)
        client.streams += 1
        if view.state in FINAL_JOB_STATES:
            client.finish(f"job {view.state.value}")
        else:
            self.subscribers.add(client)

    def _tail(self, client: ClientConnection, request: Request, tg: anyio.abc.TaskGroup) -> None:
        assert request.unit is not None
        log = self.job.log_path(request.unit)  # ControlError for a unit the job does not have
        follow = self.job.follow_log(request.unit, self.queue_size) if request.follow else None
        lines = read_tail(log, request.lines)
        client.reply(_with_id({"type": "tail", "unit": request.unit, "log": str(log), "lines": lines}, request.id))
        if follow is not None:
            client.streams += 1
            tg.start_soon(self._follow, client, request.unit, follow)
        elif request.follow:
            client.reply({"type": "end", "reason": f"the job is not running, {request.unit}'s log is not followed"})

    async def _follow(self, client: ClientConnection, unit: str, lines: Any) -> None:
        try:
            async with lines:
                async for line in lines:
                    if not client.offer(encode({"type": "line", "unit": unit, "text": line.text})):
                        return
            client.offer(encode({"type": "end", "reason": f"{unit}'s log is no longer followed (job ended)"}))
        finally:
            client.stream_ended()

    # ---------------------------------------------------------------- the end

    async def close(self) -> None:
        """The job has ended: subscribers get `end`, every client its last messages."""
        state = self.job.journal.view.state.value
        for client in list(self.clients):
            client.finish(f"job {state}" if client.streams > 0 else None)
        self.subscribers.clear()
        with anyio.move_on_after(DRAIN_SECONDS):
            for client in list(self.clients):
                await client.done.wait()


def _with_id(message: dict[str, Any], request_id: Any) -> dict[str, Any]:
    if request_id is not None:
        message["id"] = request_id
    return message


def _signal_number(name: str) -> int:
    text = name.strip().upper()
    if text.isdigit():
        number = int(text)
        if number in {s.value for s in signal.Signals}:
            return number
    else:
        text = text if text.startswith("SIG") else "SIG" + text
        with contextlib.suppress(KeyError):
            return int(signal.Signals[text])
    raise ControlError(f"unknown signal {name!r}")


def _queue_size() -> int:
    text = os.environ.get("SRTD_ATTACH_QUEUE", "")
    return int(text) if text.isdigit() and int(text) > 0 else QUEUE_SIZE


async def _bind(job: ServicePort) -> tuple[anyio.abc.SocketListener, Path]:
    directory = private_dir(runtime_dir())
    path = socket_path(job.plan.job_id, directory)
    if path.exists() or path.is_symlink():
        if is_live(path):
            raise AttachError(f"another srtd serves job {job.plan.job_id} at {path}")
        path.unlink()  # stale: its srtd was killed before it could remove it
    try:
        listener = await anyio.create_unix_listener(path, mode=0o600)
    except OSError as e:
        raise AttachError(f"cannot listen on {path}: {e.strerror or e}") from None
    return listener, path


@contextlib.asynccontextmanager
async def serve(job: ServicePort) -> AsyncIterator[AttachServer | None]:
    """Serve `job` on its attach socket for as long as the context runs (a `Service`).

    A socket that cannot be set up is reported on stderr and the job runs without one.
    """
    try:
        listener, path = await _bind(job)
    except AttachError as e:
        print(f"srtd: attach: {e}; the job runs without an attach socket", file=sys.stderr)
        yield None
        return
    server = AttachServer(job, path, queue_size=_queue_size())
    pointer: Path | None = None
    try:
        with contextlib.suppress(OSError):  # no pointer (a link planted there: FileRefused): attach by job id
            job.log_dir.mkdir(parents=True, exist_ok=True)
            pointer = write_pointer(job.log_dir, path, job.plan.job_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, listener, tg)
            tg.start_soon(server._notify)
            try:
                yield server
            finally:
                with anyio.CancelScope(shield=True):
                    await listener.aclose()
                    await server.close()
                tg.cancel_scope.cancel()
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        if pointer is not None:
            with contextlib.suppress(OSError):
                pointer.unlink()
