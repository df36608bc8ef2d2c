"""The journal: numbers every state change, writes it, folds it, broadcasts it.

`emit` is synchronous and is the only way a state changes: it assigns the next `seq`
(1, 2, 3, ... without gaps), stamps `ts` with `time.time()`, fills `prev` from the
folded view, appends the JSON line to `<log_dir>/events.jsonl` and flushes it, folds
the event into `view`, calls the in-process listeners (the job's change notifier, the
console) and offers the event to every subscriber stream.  A subscriber whose buffer
is full is dropped (its stream is closed), never waited for.

A journal file that cannot be written (a full file system, a quota, an I/O error) never
stops the job: the event is still numbered, folded and broadcast, `on_write_error` is
told once, and every later `emit` tries to catch up, appending the events the file is
missing; a short write is cut back at once, so the file only ever holds whole lines.
What was written stays; what was not is in `events`, for the post-mortem.

While the job runs, `write_behind` (a task of the job's task group) does the writing
in a worker thread (`anyio.to_thread`, the anyio idiom for a blocking file call), so
a slow or hung mount delays the file, never a decision: `emit` only queues the line.
One writer, one call at a time, the lines of each call in `seq` order: the file's
order is the events' order.  Without that task (before it starts, after it is
cancelled, in tests) `emit` writes at once, as before.  `write` is the seam a test
replaces to simulate a hung or failing file system.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Unpack

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from srtd._files import open_file
from srtd._journal_file import JOURNAL_NAME, read_journal
from srtd.errors import FileRefused
from srtd.events import Event, EventFacts, JobState, JobView, UnitState

__all__ = ["JOURNAL_NAME", "Journal", "Listener", "read_journal"]  # the first and last: the face names them here

Listener = Callable[[Event], None]
Write = Callable[[int, bytes], int]  # os.write's shape


def _write_all(write: Write, fd: int, data: bytes, good_size: int) -> OSError | None:
    """Write all of `data`; on failure cut the file back to `good_size` (no torn line)."""
    try:
        done = 0
        while done < len(data):
            done += write(fd, data[done:])
    except OSError as err:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, good_size)
        return err
    return None


class Journal:
    def __init__(self, path: Path | None, unit_names: Sequence[str], write: Write = os.write) -> None:
        self.path = path
        self._os_write = write
        self._queued = anyio.Event()  # set while write_behind has lines to write
        self._behind = False  # write_behind runs: emit only queues
        self.view = JobView.fold([], list(unit_names))
        self.events: list[Event] = []
        self._seq = 0
        self._fd: int | None = None
        self._good_size = 0  # bytes of whole lines on disk
        self._unwritten = 0  # events at the end of `events` not on disk yet
        self.write_error: str | None = None  # why the file is behind, while it is
        self.on_write_error: Callable[[str], None] | None = None
        self.on_write_resumed: Callable[[int], None] | None = None
        self._listeners: list[Listener] = []
        self._subscribers: list[MemoryObjectSendStream[Event]] = []
        self.dropped_subscribers = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = open_file(path, append=True, error=FileRefused)  # a planted link or FIFO is refused

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def state_of(self, unit: str | None) -> str:
        if unit is None:
            return self.view.state.value
        return self.view.units[unit].state.value

    def emit(self, unit: str | None, state: UnitState | JobState, **facts: Unpack[EventFacts]) -> Event:
        prev: str | None
        if unit is None:
            prev = self.view.state.value if self._seq else None
        else:
            prev = self.view.units[unit].state.value
        self._seq += 1
        event = Event(seq=self._seq, ts=time.time(), unit=unit, state=state.value, prev=prev, **facts)
        self.events.append(event)
        self._unwritten += 1
        if self._behind:
            self._queued.set()
        else:
            self._write()
        self.view.apply(event)
        for listener in list(self._listeners):
            listener(event)
        self._broadcast(event)
        return event

    def _pending(self) -> tuple[int, bytes]:
        """How many events the file lacks, and their lines."""
        count = self._unwritten
        return count, "".join(e.to_line() for e in self.events[len(self.events) - count :]).encode()

    def _write(self) -> None:
        """Append the events the file lacks, here and now."""
        if self._fd is None or not self._unwritten:
            return
        count, data = self._pending()
        self._written(count, data, _write_all(self._os_write, self._fd, data, self._good_size))

    async def write_behind(self) -> None:
        """Write queued events in a worker thread until cancelled; then `emit` writes at once again."""
        self._behind = True
        try:
            while True:
                await self._queued.wait()
                self._queued = anyio.Event()
                if self._fd is None or not self._unwritten:
                    continue
                fd, (count, data) = self._fd, self._pending()
                # Shielded, never abandoned: a cancel waits for this write and its bookkeeping,
                # so no later write overtakes it and nothing is written twice.
                with anyio.CancelScope(shield=True):
                    error = await anyio.to_thread.run_sync(_write_all, self._os_write, fd, data, self._good_size)
                    self._written(count, data, error)
        finally:
            self._behind = False

    def _written(self, count: int, data: bytes, error: OSError | None) -> None:
        """The outcome of writing the `count` oldest unwritten events (`data`)."""
        if error is not None:
            if self.write_error is None:
                self.write_error = f"{self.path}: {error.strerror or error}"
                if self.on_write_error is not None:
                    self.on_write_error(self.write_error)
            return
        self._good_size += len(data)
        self._unwritten -= count
        caught_up = count
        if self.write_error is not None:
            self.write_error = None
            if self.on_write_resumed is not None:
                self.on_write_resumed(caught_up)

    def _broadcast(self, event: Event) -> None:
        keep: list[MemoryObjectSendStream[Event]] = []
        for stream in self._subscribers:
            try:
                stream.send_nowait(event)
            except anyio.WouldBlock:
                self.dropped_subscribers += 1
                stream.close()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                stream.close()
            else:
                keep.append(stream)
        self._subscribers = keep

    def subscribe(self, max_buffer: int = 1000) -> tuple[JobView, MemoryObjectReceiveStream[Event]]:
        """A snapshot of the job and a stream of every event after it.

        No event is lost or repeated between the two.  The stream ends when the journal
        closes; a subscriber that falls `max_buffer` events behind is dropped (its
        stream ends early).
        """
        send, receive = anyio.create_memory_object_stream[Event](max_buffer)
        self._subscribers.append(send)
        return self.view.copied(), receive

    def close(self) -> None:
        for stream in self._subscribers:
            stream.close()
        self._subscribers = []
        if self._fd is not None:
            self._write()  # a last try for what the file still lacks
            os.close(self._fd)
            self._fd = None
