"""A job page's journal, as data for `templates/job.html`: units, culprit, post-mortem, timeline, notes.

The work grows with the journal (a job of 4000 units journals tens of thousands of
events), so it is bounded twice: the timeline draws at most `TIMELINE_UNITS` units, and
the fold runs in a worker thread (`fold_in_thread`), at most `RENDERS` at once, so the
event loop keeps answering the API while a big journal is folded.  The thread only
computes: it gets the journal's lines and touches neither the database nor the loop.

What the journal carries beyond the known states is shown, not interpreted: job events
and unit events with `detail` keys this page does not know (a node lost, a spare taken)
are rows of the page's "journal notes", their detail as compact JSON, bounded.
"""

from __future__ import annotations

import json
from dataclasses import field, replace
from typing import Any

import anyio
import anyio.to_thread

from srtd._value import value_class
from srtd.attach import build_timeline
from srtd.collector._views import Journal
from srtd.events import Event, UnitState

TIMELINE_UNITS = 60
RENDERS = 2  # journals folded at once (threads)
TAIL_LINES = 40  # the post-mortem's log lines shown, each cut at `LINE_CHARS`
LINE_CHARS = 400
NOTES = 200  # journal notes shown at most
NOTE_CHARS = 300
# detail keys the page shows in its own way (units, timeline, results, post-mortem): no note for them
KNOWN_DETAIL = frozenset(
    {
        "job",
        "job_id",
        "format",
        "units",
        "nodes",
        "tiers",
        "log",
        "step",
        "seconds",
        "after",
        "result",
        "culprit",
        "postmortem",
    }
)
AXIS_TICKS = 5


@value_class(frozen=False)
class Bar:
    state: str
    start: float
    end: float
    x: float  # of 1000: the SVG's own units
    width: float


@value_class(frozen=False)
class Row:
    name: str
    critical: bool
    final: str
    bars: list[Bar]


@value_class(frozen=False)
class JournalPage:
    """What the job page shows of the journal."""

    state: str
    events: int
    ready_seconds: float | None
    restarts: int
    culprit: str | None
    units: list[dict[str, Any]]
    rows: list[Row]
    unit_count: int
    duration: float
    running_x: float | None  # where the job became `running`, of 1000
    ticks: list[tuple[float, str]]  # (x of 1000, label)
    chain: list[str]
    postmortem: dict[str, Any] | None
    notes: list[dict[str, Any]] = field(default_factory=list)


def timeline_events(events: list[Event], most: int = TIMELINE_UNITS) -> tuple[list[Event], int]:
    """The events of the job and of its first `most` units (the job's own order), and how many units there are."""
    head = events[0].detail or {}
    order = list(dict.fromkeys([*head.get("units", []), *(e.unit for e in events if e.unit is not None)]))
    drawn = set(order[:most])
    if len(order) <= most:
        return events, len(order)
    trimmed = {k: v for k, v in head.items() if k not in ("units", "nodes", "tiers")}
    trimmed["units"] = order[:most]
    for key in ("nodes", "tiers"):
        trimmed[key] = {u: v for u, v in (head.get(key) or {}).items() if u in drawn}
    first = replace(events[0], detail=trimmed)
    return [first, *(e for e in events[1:] if e.unit is None or e.unit in drawn)], len(order)


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def postmortem_of(events: list[Event]) -> dict[str, Any] | None:
    """The final event's post-mortem (docs/events.md), held to its bounds again: a stored journal is
    anyone's writing, so each field is taken only when it has its type."""
    final = next((e for e in reversed(events) if e.unit is None), None)
    carried = (final.detail or {}).get("postmortem") if final is not None else None
    if not isinstance(carried, dict) or not isinstance(carried.get("unit"), str):
        return None
    log = carried.get("log")
    lines = (
        [_short(line, LINE_CHARS) for line in log[-TAIL_LINES:] if isinstance(line, str)]
        if isinstance(log, list)
        else []
    )
    out: dict[str, Any] = {"unit": carried["unit"], "log": lines}
    for key in ("reason", "fatal_line"):
        if isinstance(carried.get(key), str):
            out[key] = _short(carried[key], LINE_CHARS)
    if isinstance(carried.get("exit_code"), int):
        out["exit_code"] = carried["exit_code"]
    return out


def notes_of(events: list[Event]) -> list[dict[str, Any]]:
    """Events that say more than a state: job events with a reason or unknown detail, unit events
    with unknown detail (a node lost, a spare taken: whatever a newer srtd journals)."""
    t0 = events[0].ts
    notes = []
    for event in events:
        extra = {k: v for k, v in (event.detail or {}).items() if k not in KNOWN_DETAIL}
        if not extra and not (event.unit is None and event.reason):
            continue
        notes.append(
            {
                "at": round(event.ts - t0, 3),
                "subject": event.unit or "job",
                "state": event.state,
                "reason": _short(event.reason or "", NOTE_CHARS),
                "detail": _short(extra, NOTE_CHARS) if extra else "",
            }
        )
    return notes[-NOTES:]


def _x(seconds: float, duration: float) -> float:
    return round(1000.0 * seconds / duration, 2) if duration > 0 else 0.0


def _rows(events: list[Event]) -> tuple[list[Row], float, float | None, list[str]]:
    timeline = build_timeline(events)
    duration = max(timeline.duration, 0.001)
    chain = [link.unit for link in timeline.chain]
    rows = []
    for unit in timeline.units:
        bars = [
            Bar(s.state, s.start, s.end, _x(s.start, duration), max(_x(s.end - s.start, duration), 1.0))
            for s in unit.segments
            if s.state != UnitState.PENDING
        ]
        rows.append(Row(unit.name, unit.name in chain, unit.final, bars))
    running = _x(timeline.running, duration) if timeline.running is not None else None
    return rows, duration, running, chain


def fold(events: list[Event]) -> JournalPage | None:
    journal = Journal.of(events)
    if journal is None:
        return None
    view = journal.view
    postmortem = postmortem_of(events)
    culprit = postmortem["unit"] if postmortem is not None else journal.culprit
    units = [
        {
            "name": u.name,
            "node": u.node,
            "tier": u.tier,
            "state": u.state.value,
            "restarts": u.restarts,
            "ready_seconds": u.ready_seconds,
            "exit_code": u.exit_code,
            "reason": u.reason,
            "culprit": u.name == culprit,
        }
        for u in view.units.values()
    ]
    drawn, count = timeline_events(events)
    rows, duration, running_x, chain = _rows(drawn)
    ticks = [
        (_x(duration * i / AXIS_TICKS, duration), f"{duration * i / AXIS_TICKS:.1f} s") for i in range(AXIS_TICKS + 1)
    ]
    return JournalPage(
        state=view.state.value,
        events=len(events),
        ready_seconds=journal.ready_seconds,
        restarts=sum(u.restarts for u in view.units.values()),
        culprit=culprit,
        units=units,
        rows=rows,
        unit_count=count,
        duration=duration,
        running_x=running_x,
        ticks=ticks,
        chain=chain,
        postmortem=postmortem,
        notes=notes_of(events),
    )


def _fold_lines(lines: list[str]) -> JournalPage | None:
    return fold([Event.from_line(line) for line in lines])


async def fold_in_thread(lines: list[str], limiter: anyio.CapacityLimiter) -> JournalPage | None:
    """The journal as the job page shows it, folded off the event loop."""
    return await anyio.to_thread.run_sync(_fold_lines, lines, limiter=limiter)
