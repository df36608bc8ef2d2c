"""A job's journal file read back: `<log dir>/events.jsonl`, one event per line (docs/events.md).

Apart from the supervisor that writes it (`srtd.supervisor._journal`), so that the commands
that only read a journal (`srtd ps`, `attach --replay`, `timeline`) import neither anyio nor
the supervisor.
"""

from __future__ import annotations

from pathlib import Path

from srtd._files import JOURNAL_LIMIT, read_back
from srtd._shape import ShapeError
from srtd.events import Event

JOURNAL_NAME = "events.jsonl"  # in a job's log directory

# A journal line is one event; anything longer is not one srtd wrote.
MAX_LINE = 1 << 20


def read_journal(path: Path, skipped: list[str] | None = None) -> list[Event]:
    """Every event of a journal file, in order (a torn last line is ignored).

    A line that is not an event is left out and described in `skipped` as
    `events.jsonl:N: why`, one line each; without `skipped` it is a `ValueError`
    with that line.  Only a regular file of at most `JOURNAL_LIMIT` bytes is read
    (`srtd._files.read_back`): a FIFO or a device is refused without blocking, and
    anything else is a `ValueError` naming the file.
    """
    data = read_back(path, limit=JOURNAL_LIMIT, error=ValueError)
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: b"", or a line still being written
    events: list[Event] = []
    for number, raw in enumerate(lines, start=1):
        event, why = _parse(raw, events)
        if event is not None:
            events.append(event)
            continue
        message = f"{path.name}:{number}: {why}"
        if skipped is None:
            raise ValueError(message)
        skipped.append(message)
    if len(torn) > MAX_LINE and skipped is not None:  # no job writes a line this long
        skipped.append(f"{path.name}:{len(lines) + 1}: longer than {MAX_LINE} bytes, not an event")
    return events


def _parse(raw: bytes, events: list[Event]) -> tuple[Event | None, str]:
    """The line as the next event, or None and why it is not one."""
    if len(raw) > MAX_LINE:
        return None, f"longer than {MAX_LINE} bytes, not an event"
    try:
        event = Event.from_line(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except ShapeError as err:
        where = ".".join(str(p) for p in err.loc)
        return None, f"not an event: {where + ': ' if where else ''}{err.msg[:1].lower()}{err.msg[1:]}"
    if events and event.seq <= events[-1].seq:
        return None, f"seq {event.seq} does not follow {events[-1].seq}"
    return event, ""
