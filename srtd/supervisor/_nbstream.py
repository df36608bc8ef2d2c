"""A console stream that never blocks the supervisor.

`srtd run ... | less` with nobody paging, or a terminal stopped with Ctrl-S: a plain
`write()` to a full pipe or a stopped terminal blocks, and with it every restart, probe
and teardown of the job.  `NonBlockingStream` writes only what the pipe or terminal
takes at once (`poll()` says it is writable, then at most one chunk that fits) and keeps
the rest in memory; later writes and `flush()` push it on.  Past `limit` bytes the
oldest whole lines are dropped and one marker line says how many: the journal
(`events.jsonl`) has every event, the console is only a view of it.

Regular files are written directly (their writes do not wait for a reader), so a
batch job's output file misses nothing.
"""

from __future__ import annotations

import io
import os
import select
import stat
import time
from collections.abc import Callable
from typing import IO

LIMIT = 4 << 20  # bytes kept for a reader that is not reading
PIPE_CHUNK = 4096  # a pipe reported writable takes this much without blocking (one page)
TTY_CHUNK = 256  # a terminal reported writable has at least this much room


def _dropped_text(lines: int) -> str:
    return f"[srtd: {lines} console lines dropped while nobody read them; events.jsonl has every event]\n"


def would_block(stream: IO[str]) -> bool:
    """Whether writes to `stream` can wait on a reader: a pipe, socket or terminal."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False  # not backed by a file descriptor (StringIO in tests)
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class NonBlockingStream(io.TextIOBase):
    """A text stream over `stream`'s descriptor whose writes never wait for the reader."""

    def __init__(
        self,
        stream: IO[str],
        *,
        limit: int = LIMIT,
        dropped_text: Callable[[int], str] = _dropped_text,
    ) -> None:
        stream.flush()  # what went through the text layer before us comes first
        self._stream = stream
        self._fd = stream.fileno()
        self._tty = os.isatty(self._fd)
        self._chunk = TTY_CHUNK if self._tty else PIPE_CHUNK
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._limit = limit
        self._dropped_text = dropped_text
        self._pending = bytearray()
        self._marker: tuple[int, int, int] | None = None  # a pending marker: start, end, lines it stands for
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLOUT)

    # ------------------------------------------------------------------ TextIO surface

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._tty

    def fileno(self) -> int:
        return self._fd

    @property
    def encoding(self) -> str:  # type: ignore[override]  # a constant, read-only here
        return self._encoding

    def write(self, text: str) -> int:
        self._pending += text.encode(self._encoding, "replace")
        if len(self._pending) > self._limit:
            self._drop_oldest()
        self._push(0)
        return len(text)

    def flush(self) -> None:
        self._push(0)

    # ------------------------------------------------------------------ the work

    @property
    def pending(self) -> int:
        """Bytes written but not yet taken by the reader."""
        return len(self._pending)

    def drain(self, seconds: float) -> bool:
        """Wait up to `seconds` for the reader to take everything; True if it did."""
        deadline = time.monotonic() + seconds
        while self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._push(int(left * 1000) + 1)
        return True

    def _push(self, timeout_ms: int) -> None:
        # OSError other than "would block" (EPIPE: the reader is gone) reaches the caller.
        while self._pending:
            if not self._poll.poll(timeout_ms):
                return
            try:
                taken = os.write(self._fd, self._pending[: self._chunk])
            except BlockingIOError:
                return
            del self._pending[:taken]
            if self._marker is not None:
                start, end, lines = self._marker
                # once the reader has part of it, a later drop starts a marker of its own
                self._marker = (start - taken, end - taken, lines) if start >= taken else None

    def _drop_oldest(self) -> None:
        # Keep the line being written (a reader may already have part of it), then the
        # newest lines up to half the limit, behind one marker line.
        first_end = self._pending.find(b"\n") + 1
        keep_from = len(self._pending) - self._limit // 2
        cut = self._pending.find(b"\n", max(keep_from, first_end) - 1) + 1
        earlier = self._marker if self._marker is not None and self._marker[0] >= first_end else None
        if earlier is not None:
            cut = max(cut, earlier[1])  # one marker for the whole gap
        if cut <= first_end:
            return
        lines = self._pending.count(b"\n", first_end, cut)
        if earlier is not None:
            lines += earlier[2] - 1  # the lines it stood for, not its own line
        marker = self._dropped_text(lines).encode(self._encoding, "replace")
        self._pending[first_end:cut] = marker
        self._marker = (first_end, first_end + len(marker), lines)
