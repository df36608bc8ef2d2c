"""The log directory's free space, watched: a full log file system is told, not silent.

Units write their logs themselves (their stdout is the file, locally and under srun),
so when the log directory's file system fills, their lines are lost without an error
srtd could see, and srtd's own journal may still fit in pages it already holds.  A
full disk makes no inotify event either: nothing grows.  So srtd looks: `os.statvfs`
of the log directory every `CHECK_SECONDS`.  It is one system call that reads the file
system's counters, no I/O on the disk, cheap enough to make every few seconds for a
job's life, and a worker's lost ready line is noticed long before any readiness
timeout.  A change of level is said once, as a job event (`detail.log_space`) that the
console prints and the post-mortem keeps; leaving a level needs a margin, so a disk
at the edge does not say it again with every byte.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path

import anyio
import anyio.to_thread

from srtd._value import value_class
from srtd.supervisor._journal import Journal

CHECK_SECONDS = 2.0
LOW_BYTES = 100 * 2**20  # nearly full below this much free space, or below LOW_FRACTION of it
LOW_FRACTION = 0.05
MARGIN = 1.5  # back to `ok` only with this many times the low mark free
DETAIL_KEY = "log_space"


class Level(StrEnum):
    OK = "ok"
    LOW = "low"
    FULL = "full"


@value_class
class Space:
    """A file system's room, as `statvfs` says it to an unprivileged writer."""

    free: int  # bytes
    size: int
    inodes_left: bool

    @property
    def low_mark(self) -> int:
        return int(min(LOW_BYTES, self.size * LOW_FRACTION))

    def level(self, before: Level) -> Level:
        if self.free == 0 or not self.inodes_left:
            return Level.FULL
        mark = self.low_mark * (MARGIN if before is not Level.OK else 1)
        if self.free >= mark:
            return Level.OK
        return Level.FULL if before is Level.FULL else Level.LOW


def read_space(directory: Path) -> Space | None:
    """The room of `directory`'s file system; None when it cannot be asked (gone, hung)."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return None
    # f_files == 0: a file system without an inode count (btrfs, some network ones)
    inodes_left = stat.f_files == 0 or stat.f_favail > 0
    return Space(free=stat.f_bavail * stat.f_frsize, size=stat.f_blocks * stat.f_frsize, inodes_left=inodes_left)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


def describe(directory: Path, space: Space, level: Level) -> str:
    """The words a change of level is said in."""
    room = f"{_size(space.free)} free of {_size(space.size)}" + ("" if space.inodes_left else ", no inode left")
    where = f"the log file system of {directory} ({room})"
    if level is Level.FULL:
        return (
            f"{where} is full: units' output to their logs is lost, and a unit whose ready "
            "line cannot be written is never ready"
        )
    if level is Level.LOW:
        return f"{where} is nearly full: units' output will be lost when it fills"
    return f"{where} has room again"


class LogSpaceWatch:
    """The log file system's level as last seen (`level`), and the task that looks."""

    def __init__(self, directory: Path, journal: Journal, interval: float = CHECK_SECONDS) -> None:
        self.directory = directory
        self.journal = journal
        self.interval = interval
        self.level = Level.OK

    async def run(self) -> None:
        """Until cancelled: journal each change of level (the first look says only `low` or
        `full`: a job that starts with room says nothing).  The look runs in a worker
        thread: `statvfs` of a hung mount blocks as a write to it would (the journal's
        writes are off the event loop for the same reason), and a hung look holds one
        thread, abandoned when the job ends.  Real time, not the job's clock: how often
        srtd looks is plumbing, not supervision semantics."""
        while True:
            space = await anyio.to_thread.run_sync(read_space, self.directory, abandon_on_cancel=True)
            if space is not None:
                self._see(space)
            await anyio.sleep(self.interval)

    def _see(self, space: Space) -> None:
        now = space.level(self.level)
        if now is self.level:
            return
        self.level = now
        facts = {"level": now.value, "free_bytes": space.free, "size_bytes": space.size}
        reason = describe(self.directory, space, now)
        self.journal.emit(None, self.journal.view.state, reason=reason, detail={DETAIL_KEY: facts})
