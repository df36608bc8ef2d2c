"""One tailer per log file: complete lines to every consumer, as they are written.

The tailer follows a path the way `tail -F` does.  Each `poll()` reads only the bytes
appended since the last one (in 64 KiB chunks, at most 4 MiB before yielding to the
event loop), splits them on newlines and hands out
complete lines only; an unterminated tail is kept (at most `max_partial` bytes, the
newest ones) until its newline arrives.  A file that shrank below the read offset was
truncated: reading starts again at 0.  A path that now names another inode was rotated:
the old file is read to its end, its unterminated tail is flushed as a line, then the
new file is followed from 0.  A missing file means nothing has been written yet.

Each line carries a `generation`, bumped on every truncation and rotation, so that a
consumer can ignore lines of an earlier attempt.  The supervisor rotates a crashed
attempt's log itself through `rotate()`, which drains the old file first.

A tailer does not decide when to read: a `LogWatcher` (`_watch.py`) calls `poll()`
when inotify says the file changed, or on its adaptive poll schedule where inotify
sees nothing.  A `poll()` of a file that did not change costs one `stat`.

Consumers: `watch(handler)` registers a synchronous callback (the fatal-pattern and
log-readiness matchers; they run inside `poll`, so a burst of lines can never overflow
them); `subscribe()` gives a bounded stream for remote readers (`srtd attach`), which
is closed if it falls behind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from srtd._files import open_read
from srtd._value import value_class
from srtd.errors import FileRefused

CHUNK = 64 * 1024
MAX_PARTIAL = 64 * 1024
BURST = 4 * 1024 * 1024  # bytes read per poll before the event loop gets its turn


@value_class(slots=True)
class LogLine:
    text: str
    generation: int


LineHandler = Callable[[LogLine], None]


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\r") else text


class Watch:
    """One consumer's registration (`Tailer.watch`): a context manager, as small as one can be
    (a unit's attempt holds one for as long as it runs)."""

    __slots__ = ("_handler", "_handlers")

    def __init__(self, handlers: list[LineHandler], handler: LineHandler) -> None:
        self._handlers = handlers
        self._handler = handler

    def __enter__(self) -> None:
        self._handlers.append(self._handler)

    def __exit__(self, *exc_info: object) -> None:
        self._handlers.remove(self._handler)


class Tailer:
    __slots__ = (
        "_fd",
        "_handlers",
        "_ident",
        "_offset",
        "_partial",
        "_streams",
        "chunk",
        "generation",
        "max_partial",
        "path",
    )

    def __init__(
        self,
        path: Path,
        *,
        max_partial: int = MAX_PARTIAL,
        chunk: int = CHUNK,
    ) -> None:
        self.path = path
        self.max_partial = max_partial
        self.chunk = chunk
        self.generation = 0
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        self._handlers: list[LineHandler] = []
        self._streams: list[MemoryObjectSendStream[LogLine]] = []

    # ---------------------------------------------------------------- consumers

    def watch(self, handler: LineHandler) -> Watch:
        """`handler` gets every line while the returned context is entered."""
        return Watch(self._handlers, handler)

    def subscribe(self, max_buffer: int = 1000) -> MemoryObjectReceiveStream[LogLine]:
        send, receive = anyio.create_memory_object_stream[LogLine](max_buffer)
        self._streams.append(send)
        return receive

    def _publish(self, raw: bytes) -> None:
        line = LogLine(_decode(raw), self.generation)
        for handler in list(self._handlers):
            handler(line)
        if self._streams:
            keep: list[MemoryObjectSendStream[LogLine]] = []
            for stream in self._streams:
                try:
                    stream.send_nowait(line)
                except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    stream.close()
                else:
                    keep.append(stream)
            self._streams = keep

    # ---------------------------------------------------------------- reading

    @property
    def offset(self) -> int:
        """Bytes of the current file read so far."""
        return self._offset

    def reset(self) -> None:
        """Forget the open file; the next `poll()` opens the path again."""
        self._close()

    def _open(self) -> bool:
        try:  # a regular file only: a FIFO planted at a log's name would block the job here
            fd = open_read(self.path, follow=False, error=FileRefused)
        except (FileNotFoundError, FileRefused):
            return False
        st = os.fstat(fd)
        self._fd = fd
        self._ident = (st.st_dev, st.st_ino)
        self._offset = 0
        self._partial = b""
        return True

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._ident = None

    def _read_to_end(self, limit: int | None = None) -> bool:
        """Read what is there (at most `limit` bytes).  True if more is waiting."""
        assert self._fd is not None
        done = 0
        while limit is None or done < limit:
            data = os.pread(self._fd, self.chunk, self._offset)
            if not data:
                return False
            self._offset += len(data)
            done += len(data)
            self._split(data)
        return True

    def _split(self, data: bytes) -> None:
        buf = self._partial + data
        *lines, rest = buf.split(b"\n")
        for raw in lines:
            self._publish(raw)
        if len(rest) > self.max_partial:
            rest = rest[-self.max_partial :]
        self._partial = rest

    def _flush_partial(self) -> None:
        if self._partial:
            raw, self._partial = self._partial, b""
            self._publish(raw)

    def poll(self, limit: int | None = None) -> bool:
        """Read what has been appended (at most about `limit` bytes); handle truncation
        and rotation.  True if more is waiting to be read."""
        if self._fd is None and not self._open():
            return False
        assert self._fd is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            pass  # renamed away: keep reading the open file
        else:
            if (st.st_dev, st.st_ino) == self._ident and st.st_size == self._offset:
                return False  # the common case of an idle file: one stat, nothing to read
        size = os.fstat(self._fd).st_size
        if size < self._offset:  # truncated in place
            self.generation += 1
            self._offset = 0
            self._partial = b""
        if self._read_to_end(limit):
            return True  # a burst: the rest next time, after the loop had its turn
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # renamed away, nothing new yet: keep following the old file
        if (st.st_dev, st.st_ino) != self._ident:  # rotated: the path is a new file
            self._flush_partial()
            self._close()
            self.generation += 1
            if self._open():
                return self._read_to_end(limit)
        return False

    def rotate(self, target: Path) -> None:
        """Drain the current file, rename it to `target`, follow a fresh file from now on."""
        self.poll()
        self._flush_partial()
        self._close()
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, target)
        self.generation += 1

    def close(self) -> None:
        self._close()
        for stream in self._streams:
            stream.close()
        self._streams = []


def read_tail(path: Path, lines: int = 50, max_bytes: int = 256 * 1024) -> list[str]:
    """The last `lines` lines of a file (fewer if it is short, none if it is missing)."""
    try:
        with open(open_read(path, follow=False, error=FileRefused), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read()
    except OSError:  # FileRefused is one
        return []
    parts = data.split(b"\n")
    if start > 0:
        parts = parts[1:]  # the first piece is probably a partial line
    if parts and parts[-1] == b"":
        parts = parts[:-1]
    return [_decode(p) for p in parts[-lines:]] if lines > 0 else []
