"""The journal on a real, full tmpfs: said once, kept in memory, caught up whole, no torn line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from srtd.events import JobState, UnitState
from srtd.supervisor import read_journal
from srtd.supervisor._journal import Journal
from tests.e2e.test_full_disk import fill, small_tmpfs  # noqa: F401  (the fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def test_a_full_disk_delays_the_journal_and_loses_nothing(small_tmpfs: Path) -> None:  # noqa: F811
    path = small_tmpfs / "events.jsonl"
    journal = Journal(path, ["w"])
    errors: list[str] = []
    resumed: list[int] = []
    journal.on_write_error = errors.append
    journal.on_write_resumed = resumed.append
    journal.emit(None, JobState.STARTING)
    on_disk = path.read_bytes()
    filler = fill(small_tmpfs)
    for attempt in range(60):  # far more than the file's last page holds
        journal.emit("w", UnitState.STARTING if attempt % 2 else UnitState.EXITED, attempt=attempt)
    assert errors == [f"{path}: No space left on device"]
    assert journal.write_error == errors[0]
    assert path.read_bytes().startswith(on_disk)  # what was written stays
    assert path.read_bytes().endswith(b"\n")  # a short write was cut back: no torn line
    assert [e.seq for e in journal.events] == list(range(1, 62))  # every event in memory
    behind = 61 - len(read_journal(path))
    assert behind > 0
    filler.unlink()
    journal.emit(None, JobState.RUNNING)
    assert journal.write_error is None
    assert resumed == [behind + 1]  # the missing ones and the new one
    journal.close()
    assert [e.seq for e in read_journal(path)] == list(range(1, 63))
    assert [e.to_line() for e in read_journal(path)] == [e.to_line() for e in journal.events]


def test_close_on_a_still_full_disk_leaves_whole_lines(small_tmpfs: Path) -> None:  # noqa: F811
    path = small_tmpfs / "events.jsonl"
    journal = Journal(path, ["w"])
    journal.emit(None, JobState.STARTING)
    fill(small_tmpfs)
    for attempt in range(60):
        journal.emit("w", UnitState.STARTING, attempt=attempt)
    journal.close()
    kept = read_journal(path)
    assert path.read_bytes().endswith(b"\n")
    assert [e.seq for e in kept] == list(range(1, len(kept) + 1))
    assert 1 <= len(kept) < 61
