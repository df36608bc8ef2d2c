"""The attach server: a job's live state and control verbs on a private Unix socket.

`serve(job)` is a supervisor `Service`: it binds `<runtime dir>/<job id>.sock` (0600 in
a 0700 directory; a stale socket left by a killed srtd is replaced, a live one is not),
writes `attach.json` into the log directory, serves clients while the job runs, and
removes both when the job has ended and its clients have had their last events.

Every client is one task; nothing a client does (not reading, sending garbage, sending
a line of a gigabyte) reaches the job.  Messages to a client go through its own bounded
queue, filled without waiting (`offer`); a client whose queue is full is dropped with a
final `overflow` message.  The events of a subscription are fanned out by one journal
listener that serialises each event once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from srtd import __version__
from srtd.attach._paths import is_live, private_dir, runtime_dir, socket_path, write_pointer
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
from srtd.supervisor import Journal, read_tail

if TYPE_CHECKING:
    from srtd.supervisor import Job

QUEUE_SIZE = 1000  # messages a client may fall behind before it is dropped
DRAIN_SECONDS = 2.0  # after the job ended: how long clients get to read their last events
OVERFLOW_GRACE = 10.0  # a dropped client gets this long to take its `overflow` message
READ_CHUNK = 64 * 1024
WRITE_BATCH = 256  # messages joined into one write at most

_Item = tuple[Sequence[bytes], int | None]  # messages written together, the last event seq among them


def peer_credentials(stream: anyio.abc.SocketStream) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    data = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", data)
    return pid, uid, gid


class _Client:
    """One connection: its queue, its writer, and what it is subscribed to."""

    def __init__(self, stream: anyio.abc.SocketStream, queue_size: int, pid: int) -> None:
        self.stream = stream
        self.pid = pid
        self._send, self._receive = anyio.create_memory_object_stream[_Item](queue_size)
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.streams = 0  # subscriptions and follows still running
        self.reading = True  # the client may still send requests
        self.dropped = False
        self.delivered_seq: int | None = None  # the last event seq written to the socket
        self._tg: anyio.abc.TaskGroup | None = None

    def offer(self, *messages: bytes, seq: int | None = None) -> bool:
        """Queue messages without waiting.  False (and the client is dropped) if it is full."""
        if self.dropped:
            return False
        try:
            self._send.send_nowait((messages, seq))
        except anyio.WouldBlock:
            self.drop()
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def reply(self, message: dict[str, Any]) -> None:
        self.offer(encode(message))

    def drop(self) -> None:
        if self.dropped:
            return
        self.dropped = True
        self._send.close()
        if self._tg is not None:
            self._tg.start_soon(self._cut_after_grace)

    async def _cut_after_grace(self) -> None:
        await anyio.sleep(OVERFLOW_GRACE)
        self.scope.cancel()

    def stream_ended(self) -> None:
        self.streams -= 1
        self.maybe_finish()

    def maybe_finish(self) -> None:
        """Nothing more will be queued: the writer ends once the queue is written."""
        if not self.reading and self.streams <= 0:
            self._send.close()

    def finish(self) -> None:
        self.reading = False
        self.streams = 0
        self._send.close()

    async def write(self) -> None:
        try:
            async with self._receive:
                async for messages, seq in self._receive:
                    if self.dropped:
                        break
                    # Whatever else is queued goes out in the same write: one system
                    # call per wake-up, not one per message.
                    batch = list(messages)
                    with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream):
                        while len(batch) < WRITE_BATCH:
                            more, more_seq = self._receive.receive_nowait()
                            batch += more
                            seq = more_seq if more_seq is not None else seq
                    await self.stream.send(b"".join(batch))
                    if seq is not None:
                        self.delivered_seq = seq
            if self.dropped:
                note = "client too slow: dropped"
                if self.delivered_seq is not None:
                    note += f"; resume with subscribe from_seq {self.delivered_seq}"
                await self.stream.send(encode({"type": "overflow", "last_seq": self.delivered_seq, "message": note}))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self.scope.cancel()


async def _request_lines(stream: anyio.abc.SocketStream) -> AsyncIterator[bytes | None]:
    """Request lines as they arrive; None for a line longer than `MAX_REQUEST` (dropped)."""
    buffer = b""
    skipping = False  # inside an overlong line: discard up to its newline
    while True:
        try:
            chunk = await stream.receive(READ_CHUNK)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return
        buffer += chunk
        while (newline := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:newline], buffer[newline + 1 :]
            if skipping:
                skipping = False
                continue
            if len(line) > MAX_REQUEST:
                yield None
            elif line.strip():
                yield line.strip()
        if len(buffer) > MAX_REQUEST:
            if not skipping:
                skipping = True
                yield None
            buffer = b""


class AttachServer:
    def __init__(self, job: Job, path: Path, *, queue_size: int = QUEUE_SIZE) -> None:
        self.job = job
        self.path = path
        self.queue_size = queue_size
        self.clients: set[_Client] = set()
        self.subscribers: set[_Client] = set()
        self._journal: Journal | None = None
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
        if not self.subscribers:
            return
        message = event_message(event.to_line())
        for client in list(self.subscribers):
            if not client.offer(message, seq=event.seq):
                self.subscribers.discard(client)

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
            client = _Client(stream, self.queue_size, pid)
            self.clients.add(client)
            try:
                with client.scope:
                    async with anyio.create_task_group() as tg:
                        client._tg = tg
                        tg.start_soon(client.write)
                        client.reply(self.hello())
                        async for line in _request_lines(stream):
                            self._request(client, line, tg)
                        client.reading = False
                        client.maybe_finish()
            except Exception as e:  # a bug in one connection must not touch the job
                print(f"srtd: attach: connection error: {type(e).__name__}: {e}", file=sys.stderr)
            finally:
                self.clients.discard(client)
                self.subscribers.discard(client)
                client.done.set()

    def _request(self, client: _Client, line: bytes | None, tg: anyio.abc.TaskGroup) -> None:
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

    def _dispatch(self, client: _Client, request: Request, tg: anyio.abc.TaskGroup) -> None:
        job = self.job
        reply = _with_id({"type": "ok", "cmd": request.cmd}, request.id)
        if request.cmd == "snapshot":
            journal = self.journal()
            client.reply(_with_id(snapshot_message(journal.view, list(job.runners), **self._extras()), request.id))
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

    async def _signal(self, client: _Client, request: Request, signum: int, reply: dict[str, Any]) -> None:
        assert request.unit is not None
        try:
            await self.job.signal_unit(request.unit, signum)
        except ControlError as e:
            client.reply(error("refused", str(e), request.id))
        except OSError as e:
            client.reply(error("failed", f"cannot signal {request.unit}: {e}", request.id))
        else:
            client.reply({**reply, "unit": request.unit, "signal": signal.Signals(signum).name})

    def _subscribe(self, client: _Client, request: Request) -> None:
        journal = self.journal()
        view = journal.view
        start = view.seq if request.from_seq is None else request.from_seq
        if start > view.seq:
            raise ControlError(f"from_seq {start} is ahead of the journal (seq {view.seq})")
        if client in self.subscribers:
            raise ControlError("already subscribed on this connection")
        # One synchronous step: the snapshot, what was missed and the registration for
        # what comes next, so nothing falls between them and nothing comes twice.
        messages = [encode(_with_id(snapshot_message(view, list(self.job.runners), **self._extras()), request.id))]
        messages += [event_message(e.to_line()) for e in journal.events[start:]]
        if view.state in FINAL_JOB_STATES:
            messages.append(encode({"type": "end", "reason": f"job {view.state.value}"}))
            client.offer(*messages, seq=view.seq)
            return
        client.streams += 1
        if client.offer(*messages, seq=view.seq):
            self.subscribers.add(client)

    def _tail(self, client: _Client, request: Request, tg: anyio.abc.TaskGroup) -> None:
        assert request.unit is not None
        runner = self.job.runners.get(request.unit)
        if runner is None:
            raise ControlError(f"no unit {request.unit!r} in job {self.job.plan.job_id}")
        path = runner.log_path
        follow = request.follow and self.job.journal.view.state not in FINAL_JOB_STATES
        lines_stream = None
        if follow:
            tailer = self.job.tailer(path)
            with contextlib.suppress(OSError):
                tailer.poll()  # hand out what is written so far, so the stream starts where the tail ends
            lines_stream = tailer.subscribe(max_buffer=self.queue_size)
        lines = read_tail(path, request.lines)
        client.reply(_with_id({"type": "tail", "unit": request.unit, "log": str(path), "lines": lines}, request.id))
        if lines_stream is not None:
            client.streams += 1
            tg.start_soon(self._follow, client, request.unit, lines_stream)

    async def _follow(self, client: _Client, unit: str, lines: Any) -> None:
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
            if client in self.subscribers:
                client.offer(encode({"type": "end", "reason": f"job {state}"}))
            client.finish()
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


async def _bind(job: Job) -> tuple[anyio.abc.SocketListener, Path]:
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
async def serve(job: Job) -> AsyncIterator[AttachServer | None]:
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
        with contextlib.suppress(OSError):
            job.log_dir.mkdir(parents=True, exist_ok=True)
            pointer = write_pointer(job.log_dir, path, job.plan.job_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, listener, tg)
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
