"""When to read a log: inotify events locally, an adaptive stat-poll where there are none.

A job owns one `LogWatcher`, which owns the decision of *when* each `Tailer` reads
its file (what a read does is the tailer's business).  Two kinds:

- `InotifyWatcher`: one inotify descriptor for the whole job, one watch per log
  directory.  The loop sleeps in `anyio.wait_readable` on that descriptor, so a
  thousand quiet logs cost nothing at all; a write wakes it, and only the files
  named in the events are read.  After a batch of more than `BIG_BATCH` files it
  pauses `BATCH_PAUSE`, so that a thousand chatty files are read in batches rather
  than once per `write()`.
- `PollWatcher`: for file systems that do not deliver inotify events for the
  writes that matter (a shared file system written from other nodes: Slurm's
  `srun --output`).  One task, one heap of due times: a file that just grew is
  read again after `FAST_POLL`, a quiet one ever more slowly (doubling) up to
  `SLOW_POLL`, so 1000 idle files cost about 2000 `stat`s a second, and a line is
  seen within `SLOW_POLL` plus a read however long the file was quiet.

The mode is `auto` (inotify, or polling where inotify cannot be set up),
`inotify` or `poll`.  Who knows that the logs live on a shared file system (a
launcher, the user through `SRTD_LOG_WATCH`) says `poll`.

Library: `inotify_simple` (a ctypes binding of `inotify_init1`/`inotify_add_watch`,
no thread, no compiled code) rather than `watchfiles`, whose Rust watcher runs in a
thread per `awatch` and debounces by default; here the descriptor is awaited on the
event loop itself like any socket.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import anyio

from srtd.errors import UsageError
from srtd.supervisor._tail import BURST, Tailer

WatchMode = Literal["auto", "inotify", "poll"]
WATCH_MODES: tuple[WatchMode, ...] = ("auto", "inotify", "poll")
WATCH_ENV = "SRTD_LOG_WATCH"

FAST_POLL = 0.05  # a file that just grew is read again this soon
SLOW_POLL = 0.5  # the longest a quiet file goes unread (fallback only)
BATCH_PAUSE = 0.005  # after a big batch of inotify events: let more writes accumulate
BIG_BATCH = 8  # files in one batch


def watch_mode(value: str | None) -> WatchMode:
    """`value` as a mode (`None` or empty: `auto`); ValueError names the choices."""
    if not value:
        return "auto"
    for mode in WATCH_MODES:
        if value == mode:
            return mode
    raise ValueError(f"log watch mode must be one of {', '.join(WATCH_MODES)}, not {value!r}")


def choose_watch_mode(explicit: WatchMode | None, launcher_mode: str | None) -> WatchMode:
    """The caller's choice, else $SRTD_LOG_WATCH, else the launcher's `log_watch`
    (a launcher whose logs are written on other nodes says `poll`), else `auto`."""
    if explicit is not None:
        return explicit
    try:
        from_env = watch_mode(os.environ.get(WATCH_ENV))
    except ValueError as e:
        raise UsageError(f"${WATCH_ENV}: {e}") from e
    if os.environ.get(WATCH_ENV):
        return from_env
    return watch_mode(launcher_mode)


def _read(tailer: Tailer) -> tuple[bool, bool]:
    """Poll once.  (grew, more waiting)."""
    before = (tailer.generation, tailer.offset)
    try:
        more = tailer.poll(limit=BURST)
    except OSError:
        tailer.reset()  # unreadable for now (an NFS hiccup): start over next time
        return False, False
    return (tailer.generation, tailer.offset) != before, more


class LogWatcher:
    """Reads each added tailer when its file may have changed, until cancelled."""

    mode: WatchMode

    def add(self, tailer: Tailer) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the watcher holds (the tailers are closed by their owner)."""


class PollWatcher(LogWatcher):
    """The portable fallback: stat every file, often while it grows, seldom while quiet."""

    mode: WatchMode = "poll"

    def __init__(self, *, fast: float = FAST_POLL, slow: float = SLOW_POLL) -> None:
        self.fast = fast
        self.slow = slow
        self._due: list[tuple[float, int, Tailer]] = []
        self._pace: dict[int, float] = {}
        self._added = anyio.Event()
        self._seq = 0

    def add(self, tailer: Tailer) -> None:
        self._schedule(tailer, 0.0)
        self._added.set()

    def _schedule(self, tailer: Tailer, delay: float) -> None:
        self._seq += 1
        heapq.heappush(self._due, (anyio.current_time() + delay, self._seq, tailer))

    def _next_pace(self, tailer: Tailer, grew: bool) -> float:
        key = id(tailer)
        pace = self.fast if grew else min(self._pace.get(key, self.fast) * 2, self.slow)
        self._pace[key] = pace
        return pace

    async def run(self) -> None:
        while True:
            if not self._due:
                self._added = anyio.Event()
                await self._added.wait()
                continue
            due = self._due[0][0]
            now = anyio.current_time()
            if due > now:
                self._added = anyio.Event()
                with anyio.move_on_after(due - now):
                    await self._added.wait()  # a new file is read at once
                continue
            while self._due and self._due[0][0] <= now:  # everything due, then one checkpoint
                _, _, tailer = heapq.heappop(self._due)
                grew, more = _read(tailer)
                self._schedule(tailer, 0.0 if more else self._next_pace(tailer, grew))
            await anyio.sleep(0)


_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_DIR_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE


class InotifyWatcher(LogWatcher):
    """Local file systems: read a file when the kernel says it changed, never otherwise.

    Directories are watched rather than files, so that a log that does not exist yet,
    or that a restart rotates away and recreates, is followed without re-adding
    watches.  A log whose directory cannot be watched is polled (`PollWatcher`).
    """

    mode: WatchMode = "inotify"

    def __init__(self) -> None:
        from srtd.supervisor._inotify import INotify  # without ctypes.util and ldconfig

        self._inotify = INotify(nonblocking=True)  # OSError where inotify is unavailable
        self._dirs: dict[int, Path] = {}  # watch descriptor -> directory
        self._wds: dict[Path, int] = {}
        self._files: dict[tuple[Path, str], list[Tailer]] = {}
        self._dirty: dict[int, Tailer] = {}
        self._woken = anyio.Event()
        self._fallback = PollWatcher()
        self._polled = False

    def add(self, tailer: Tailer) -> None:
        directory = tailer.path.parent
        wd = self._wds.get(directory)
        if wd is None:
            try:
                wd = self._inotify.add_watch(directory, _DIR_MASK)
            except OSError:
                self._polled = True
                self._fallback.add(tailer)  # no such directory yet, or out of watches
                return
            self._wds[directory] = wd
            self._dirs[wd] = directory
        else:
            directory = self._dirs[wd]  # one path per directory, however many of its files are tailed
        self._files.setdefault((directory, tailer.path.name), []).append(tailer)
        self._mark([tailer])  # what it wrote before we watched

    def _mark(self, tailers: Iterable[Tailer]) -> None:
        for tailer in tailers:
            self._dirty[id(tailer)] = tailer
        if self._dirty:  # events for files nobody tails (the journal, rotated logs) wake nothing
            self._woken.set()

    def _drain_events(self) -> None:
        for event in self._inotify.read(timeout=0):
            if event.mask & _IN_Q_OVERFLOW:
                self._mark(t for group in self._files.values() for t in group)
                continue
            if event.mask & _IN_IGNORED:  # the directory went away: its watch is gone
                directory = self._dirs.pop(event.wd, None)
                if directory is not None:
                    self._wds.pop(directory, None)
                continue
            directory = self._dirs.get(event.wd)
            if directory is not None:
                self._mark(self._files.get((directory, event.name), ()))

    async def _events(self) -> None:
        while True:
            await anyio.wait_readable(self._inotify.fileno())
            self._drain_events()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._events)
            tg.start_soon(self._fallback.run)
            while True:
                await self._woken.wait()
                self._woken = anyio.Event()
                while self._dirty:
                    batch, self._dirty = self._dirty, {}
                    for tailer in batch.values():
                        _, more = _read(tailer)
                        if more:
                            self._dirty[id(tailer)] = tailer
                    # a big batch means many chatty files: let their writes pile up a little
                    await anyio.sleep(BATCH_PAUSE if len(batch) > BIG_BATCH and not self._dirty else 0)

    def close(self) -> None:
        self._inotify.close()


def open_watcher(mode: WatchMode) -> LogWatcher:
    """The watcher for `mode`; `auto` falls back to polling where inotify is unavailable."""
    if mode == "poll":
        return PollWatcher()
    try:
        return InotifyWatcher()
    except OSError:
        if mode == "inotify":
            raise
        return PollWatcher()


def mode_from_env(default: WatchMode = "auto") -> WatchMode:
    value = os.environ.get(WATCH_ENV)
    return watch_mode(value) if value else default
