from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from srtd.events import JobState, JobView, UnitState
from srtd.supervisor import Journal, read_journal


@pytest.mark.anyio
async def test_seq_prev_file_and_fold(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    journal = Journal(path, ["a"])
    journal.emit(None, JobState.STARTING)
    journal.emit("a", UnitState.STARTING, attempt=0, pid=42)
    snapshot, stream = journal.subscribe()
    journal.emit("a", UnitState.READY, attempt=0)
    journal.emit("a", UnitState.EXITED, exit_code=3, attempt=0)
    journal.emit(None, JobState.FAILED, exit_code=1, reason="a failed")
    journal.close()

    events = read_journal(path)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [(e.unit, e.prev, e.state) for e in events] == [
        (None, None, "starting"),
        ("a", "pending", "starting"),
        ("a", "starting", "ready"),
        ("a", "ready", "exited"),
        (None, "starting", "failed"),
    ]
    assert events == journal.events
    assert JobView.fold(events, ["a"]) == journal.view
    # the snapshot plus the stream is exactly the journal
    assert snapshot.seq == 2
    streamed = [e async for e in stream]
    assert [e.seq for e in streamed] == [3, 4, 5]


@pytest.mark.anyio
async def test_slow_subscriber_is_dropped(tmp_path: Path) -> None:
    journal = Journal(None, ["a"])
    _, slow = journal.subscribe(max_buffer=1)
    _, fast = journal.subscribe(max_buffer=10)
    journal.emit(None, JobState.STARTING)
    journal.emit("a", UnitState.STARTING)  # the slow one's buffer is full: dropped
    journal.emit("a", UnitState.READY)
    assert journal.dropped_subscribers == 1
    assert (await slow.receive()).seq == 1
    with pytest.raises(anyio.EndOfStream):
        await slow.receive()
    assert [(await fast.receive()).seq for _ in range(3)] == [1, 2, 3]


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    journal = Journal(path, [])
    journal.emit(None, JobState.STARTING)
    journal.close()
    with open(path, "a") as f:
        f.write('{"seq": 2, "ts"')
    assert [e.seq for e in read_journal(path)] == [1]
