"""One attach client's connection: its bounded reply queue, its place in the journal, its writer.

Nothing here waits but the writer, the connection's own task; the server (`_server`) only
offers messages without waiting and nudges.
"""

from __future__ import annotations

import socket
import struct
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from srtd.attach._protocol import MAX_REQUEST, encode

if TYPE_CHECKING:
    from srtd.attach._server import AttachServer
    from srtd.supervisor import Journal

OVERFLOW_GRACE = 10.0  # a dropped client gets this long to take its `overflow` message
READ_CHUNK = 64 * 1024
WRITE_BATCH = 256  # messages joined into one write at most


def peer_credentials(stream: anyio.abc.SocketStream) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    data = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", data)
    return pid, uid, gid


class ClientConnection:
    """One connection: its replies, its place in the journal, and its writer.

    What a client is sent is bounded two ways: at most `limit` replies (and followed
    log lines) may wait, and its place in the journal (`cursor`) may fall at most
    `limit` events behind the journal's end.  A client past either bound is dropped.
    Nothing here ever waits but the writer, which is the client's own task.
    """

    def __init__(self, server: AttachServer, stream: anyio.abc.SocketStream, limit: int, pid: int) -> None:
        self.server = server
        self.stream = stream
        self.limit = limit
        self.pid = pid
        self.direct: deque[bytes] = deque()  # replies and log lines, in order
        self.journal: Journal | None = None
        self.cursor: int | None = None  # index in journal.events of the next event to send
        self.floor = 0
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.streams = 0  # subscriptions and follows still running
        self.reading = True  # the client may still send requests
        self.closing = False  # nothing more will be queued
        self.end_reason: str | None = None  # sent as `end` once everything else is out
        self.dropped = False
        self.delivered_seq: int | None = None  # the client has every event up to this seq
        self._nudge = anyio.Event()
        self.tasks: anyio.abc.TaskGroup | None = None

    def offer(self, message: bytes) -> bool:
        """Queue a message without waiting.  False (and the client is dropped) if it is full."""
        if self.dropped or self.closing:
            return False
        if len(self.direct) >= self.limit:
            self.drop()
            return False
        self.direct.append(message)
        self.nudge()
        return True

    def reply(self, message: dict[str, Any]) -> None:
        self.offer(encode(message))

    def nudge(self) -> None:
        self._nudge.set()

    def follow_journal(self, journal: Journal, start: int) -> None:
        """From now on, send every event after `start` (a seq: the index of the next one)."""
        self.journal = journal
        self.cursor = start
        self.floor = len(journal.events)  # a replay of what was missed does not count as lag
        self.delivered_seq = start
        self.nudge()

    def lag(self, head: int) -> int:
        return head - max(self.cursor, self.floor) if self.cursor is not None else 0

    def drop(self) -> None:
        if self.dropped:
            return
        self.dropped = True
        self.nudge()
        if self.tasks is not None:
            self.tasks.start_soon(self._cut_after_grace)

    async def _cut_after_grace(self) -> None:
        await anyio.sleep(OVERFLOW_GRACE)
        self.scope.cancel()

    def stream_ended(self) -> None:
        self.streams -= 1
        self.maybe_finish()

    def maybe_finish(self) -> None:
        """Nothing more will be queued: the writer ends once everything is written."""
        if not self.reading and self.streams <= 0:
            self.finish()

    def finish(self, end_reason: str | None = None) -> None:
        self.reading = False
        self.streams = 0
        self.closing = True
        self.end_reason = self.end_reason or end_reason
        self.nudge()

    def _next_batch(self) -> tuple[list[bytes], int | None]:
        """Replies first, then journal events; at most `WRITE_BATCH` messages."""
        if self.direct:
            count = min(len(self.direct), WRITE_BATCH)
            return [self.direct.popleft() for _ in range(count)], None
        if self.journal is not None and self.cursor is not None:
            head = len(self.journal.events)
            if self.cursor < head:
                stop = min(head, self.cursor + WRITE_BATCH)
                batch = self.server.event_lines(self.cursor, stop)
                self.cursor = stop
                return batch, stop  # events[i] has seq i + 1
        return [], None

    async def write(self) -> None:
        try:
            while not self.dropped:
                batch, seq = self._next_batch()
                if batch:
                    # One system call per wake-up, whatever piled up meanwhile.
                    await self.stream.send(b"".join(batch))
                    if seq is not None:
                        self.delivered_seq = seq
                    continue
                if self.closing:
                    if self.end_reason is not None:
                        await self.stream.send(encode({"type": "end", "reason": self.end_reason}))
                    return
                await self._nudge.wait()
                self._nudge = anyio.Event()
            note = "client too slow: dropped"
            if self.delivered_seq is not None:
                note += f"; resume with subscribe from_seq {self.delivered_seq}"
            await self.stream.send(encode({"type": "overflow", "last_seq": self.delivered_seq, "message": note}))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self.scope.cancel()


async def request_lines(stream: anyio.abc.SocketStream) -> AsyncIterator[bytes | None]:
    """Request lines as they arrive; None for a line longer than `MAX_REQUEST` (dropped).

    Linear in what the client sends: each chunk is split once (a flood of newlines used to
    re-copy the buffer at every line: quadratic), and at most `MAX_REQUEST` bytes of an
    unfinished line are kept.  (anyio's `receive_until` re-copies its buffer per line too.)
    """
    pending = b""  # the start of a line whose newline has not come yet
    skipping = False  # inside an overlong line: discard up to its newline
    while True:
        try:
            chunk = await stream.receive(READ_CHUNK)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if skipping:
                skipping = False
            elif len(line) > MAX_REQUEST:
                yield None
            elif line.strip():
                yield line.strip()
        if len(pending) > MAX_REQUEST:
            if not skipping:
                skipping = True
                yield None
            pending = b""
