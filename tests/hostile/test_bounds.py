"""The small pieces the hostile-input guarantees rest on, one by one."""

from __future__ import annotations

import errno
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from srtd.attach import build_timeline
from srtd.errors import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_LAUNCH,
    LaunchError,
    UsageError,
    describe,
    exit_code_for,
    printable,
    user_error,
)
from srtd.events import Event
from srtd.supervisor import read_journal
from srtd.unit import unsafe_name, within
from tests.hostile.helpers import EXAMPLE_JOURNAL


@pytest.mark.parametrize(
    ("path", "inside"),
    [
        ("logs/a.out", True),
        ("logs/sub/a.out", True),
        ("logs/../a.out", False),
        ("logs/../../tmp/x", False),
        ("logs", False),  # the directory itself is not a file in it
        ("logsX/a.out", False),
        ("/tmp/elsewhere", False),
    ],
)
def test_within_is_lexical_containment(path: str, inside: bool) -> None:
    assert within("logs", path) is inside


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a..b", "x\ny", "x\x7f", "../x"])
def test_unsafe_names(name: str) -> None:
    assert unsafe_name(name)


@pytest.mark.parametrize("name", ["agg", "prefill_0", "job 42", "qwen3-0.6b", "a.b"])
def test_safe_names(name: str) -> None:
    assert not unsafe_name(name)


def test_read_journal_strict_names_the_line_and_lenient_skips_it(tmp_path: Path) -> None:
    lines = EXAMPLE_JOURNAL.read_text().splitlines(keepends=True)
    lines.insert(1, "not json\n")
    path = tmp_path / "events.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=r"^events.jsonl:2: not an event: "):
        read_journal(path)
    skipped: list[str] = []
    events = read_journal(path, skipped)
    assert len(events) == len(lines) - 1
    assert len(skipped) == 1
    assert skipped[0].startswith("events.jsonl:2: not an event: ")


def test_an_over_long_journal_line_is_skipped_whole(tmp_path: Path) -> None:
    lines = EXAMPLE_JOURNAL.read_text().splitlines(keepends=True)
    lines.insert(1, "x" * (3 << 20) + "\n")
    path = tmp_path / "events.jsonl"
    path.write_text("".join(lines))
    skipped: list[str] = []
    assert len(read_journal(path, skipped)) == len(lines) - 1
    assert skipped == ["events.jsonl:2: longer than 1048576 bytes, not an event"]


def test_a_task_group_of_user_errors_is_reported_by_its_first() -> None:
    group = ExceptionGroup("tasks", [UsageError("first"), LaunchError("second")])
    assert user_error(group) is group.exceptions[0]
    assert exit_code_for(group.exceptions[0]) == EXIT_INPUT
    mixed = ExceptionGroup("tasks", [UsageError("x"), KeyError("bug")])
    assert user_error(mixed) is None
    assert exit_code_for(mixed) == EXIT_INTERNAL


def test_an_os_error_is_one_line_and_exit_3() -> None:
    err = OSError(errno.ENOSPC, "No space left on device", "/logs/a.out")
    assert (describe(err), exit_code_for(err)) == ("/logs/a.out: No space left on device", EXIT_LAUNCH)


def test_printable_keeps_one_line() -> None:
    assert printable("a\nb\tc\x1b") == "a\\nb\\tc\\x1b"


def test_printable_keeps_one_line_for_every_line_break_python_knows() -> None:
    for char in ("\x85", "\u2028", "\u2029", "\x1c", "\x9b"):
        assert len(printable(f"a{char}b").splitlines()) == 1


class _Counted(list[Event]):
    """A journal's events that count how many of them a reader looks at."""

    looked = 0

    def __iter__(self) -> Iterator[Event]:
        for event in super().__iter__():
            self.looked += 1
            yield event

    def __getitem__(self, index: Any) -> Any:
        self.looked += 1
        return super().__getitem__(index)


def _big_journal(units: int) -> _Counted:
    """A job of `units` units in a chain, each waiting, starting, ready, stopping, stopped."""
    names = [f"u{i}" for i in range(units)]
    head = {"format": 1, "job": "big", "job_id": "1", "units": names, "tiers": {n: i % 3 for i, n in enumerate(names)}}
    events = _Counted([Event(seq=1, ts=1.0, state="starting", detail=head)])

    def add(unit: str | None, state: str, **facts: Any) -> None:
        events.append(Event(seq=len(events) + 1, ts=1.0 + len(events) / 1000, unit=unit, state=state, **facts))

    for i, name in enumerate(names):
        add(name, "waiting", detail={"after": [f"u{i - 1} (ready)"]} if i else None)
    for name in names:
        add(name, "starting", attempt=0)
        add(name, "ready", detail={"seconds": 0.5})
    add(None, "running")
    add(None, "stopping")
    for name in names:
        add(name, "stopping")
        add(name, "stopped")
    add(None, "succeeded", exit_code=0)
    return events


def test_the_timeline_of_thousands_of_units_reads_each_event_a_few_times() -> None:
    # Searching the whole journal once per unit (units x events) made a 2500-unit job's
    # timeline take many seconds; a few passes over it are linear.
    events = _big_journal(2500)
    timeline = build_timeline(events)
    assert len(timeline.units) == 2500
    assert [link.unit for link in timeline.chain][-2:] == ["u2498", "u2499"]
    assert len(timeline.chain) == 2500
    assert events.looked <= 12 * len(events), events.looked / len(events)


def test_the_gantt_of_thousands_of_units_draws_a_bounded_number_of_rows() -> None:
    # Each row costs rich milliseconds to lay out: 2500 rows took tens of seconds to draw
    # (terminal and SVG); the rows past MAX_ROWS are counted, not drawn.
    from rich.console import Console

    from srtd.attach._timeline import MAX_ROWS, render_timeline

    out = Console(record=True, width=200, file=io.StringIO())
    out.print(render_timeline(build_timeline(_big_journal(2500))))
    text = out.export_text()
    rows = [line for line in text.splitlines() if re.match(r"\s*u\d+ +│", line)]
    assert len(rows) == MAX_ROWS
    assert f"({2500 - MAX_ROWS} more) │" in text
