"""A hung file system delays the journal's file, never the event loop: `write_behind`.

The writer seam stands in for a mount whose `write(2)` blocks (an NFS server gone): it
blocks on a `threading.Event` until the test lets it go.  Meanwhile events are numbered,
folded and broadcast at once; afterwards the file holds every event, in order, once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import pytest

from srtd.events import JobState, UnitState
from srtd.supervisor import read_journal
from srtd.supervisor._journal import Journal


class HungMount:
    """`os.write` that blocks until `released` is set and counts its calls."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.calls = 0

    def write(self, fd: int, data: bytes) -> int:
        self.calls += 1
        self.released.wait(timeout=30)
        return os.write(fd, data)


@pytest.mark.anyio
async def test_a_hung_write_delays_the_file_not_the_events_and_loses_or_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    mount = HungMount()
    journal = Journal(path, ["w"], write=mount.write)
    mount.released.set()
    journal.emit(None, JobState.STARTING)  # before write_behind: written at once, as always
    mount.released.clear()
    _, stream = journal.subscribe()
    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.write_behind)
        await anyio.sleep(0)
        with anyio.fail_after(2):  # the loop is not held by the hung write
            for attempt in range(20):
                journal.emit("w", UnitState.STARTING, attempt=attempt)
                await anyio.sleep(0.01)
                journal.emit("w", UnitState.EXITED, attempt=attempt, exit_code=1)
            got = [stream.receive_nowait().seq for _ in range(40)]
        assert got == list(range(2, 42))  # broadcast at once, in order
        assert journal.view.units["w"].state == "exited"
        assert [e.seq for e in read_journal(path)] == [1]  # the file waits for the mount
        mount.released.set()
        with anyio.fail_after(5):
            while journal._unwritten:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    journal.emit(None, JobState.SUCCEEDED)  # after write_behind: written at once again
    journal.close()
    assert [e.seq for e in read_journal(path)] == list(range(1, 43))
    assert mount.calls < 40  # queued events go in batches, not one thread call each


@pytest.mark.anyio
async def test_a_cancel_during_a_hung_write_waits_for_it_and_nothing_is_written_twice(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    mount = HungMount()
    journal = Journal(path, ["w"], write=mount.write)
    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.write_behind)
        await anyio.sleep(0)
        journal.emit(None, JobState.STARTING)
        await anyio.sleep(0.05)  # the writer is inside the hung write now
        tg.cancel_scope.cancel()
        threading.Timer(0.2, mount.released.set).start()
    journal.emit(None, JobState.RUNNING)
    journal.close()
    assert [e.seq for e in read_journal(path)] == [1, 2]
