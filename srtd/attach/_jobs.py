"""What a job's journal says, read from its log directory by a client (`srtd submit --wait`, `srtd ps`).

The journal is `<log dir>/events.jsonl` (`JOURNAL_NAME`); a job's state is the fold
of its events.  These readers never raise for a journal that is missing, unreadable
or half written: a client asks "what do we know", and nothing is an answer.
"""

from __future__ import annotations

from pathlib import Path

from srtd.events import FINAL_JOB_STATES, Event, JobView
from srtd.supervisor import JOURNAL_NAME, read_journal


def journal_events(log_dir: Path) -> list[Event] | None:
    """The journal's events (lines that are not events left out), or None when it cannot be read."""
    try:
        return read_journal(log_dir / JOURNAL_NAME, [])
    except (OSError, ValueError):
        return None


def journal_view(log_dir: Path) -> JobView | None:
    """The job's state folded from its journal, or None when there is no readable journal."""
    events = journal_events(log_dir)
    if not events:
        return None
    order = list((events[0].detail or {}).get("units", []))
    return JobView.fold(events, order)


def journal_end(log_dir: Path) -> tuple[str, int] | None:
    """The job's final state and exit code, once its journal has them."""
    for event in reversed(journal_events(log_dir) or []):
        if event.unit is None and event.state in FINAL_JOB_STATES:
            return str(event.state), int(event.exit_code or 0)
    return None
