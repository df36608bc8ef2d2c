"""A job page's journal section: the units, the culprit, time to ready and the startup timeline.

The work grows with the journal (a job of 4000 units journals tens of thousands of
events), so it is bounded twice: the timeline draws at most `TIMELINE_UNITS` units (rich's
SVG export costs about 15 ms a row), and the whole section is rendered in a worker thread
(`render_in_thread`), at most `RENDERS` at once, so the event loop keeps answering the
API while a big page is drawn.  The thread only computes: it gets the journal's lines and
touches neither the database nor the loop.
"""

from __future__ import annotations

import re

import anyio
import anyio.to_thread

from srtd.attach import build_timeline, svg_text
from srtd.collector._html import esc, facts, seconds, table
from srtd.collector._views import Journal
from srtd.events import Event

TIMELINE_UNITS = 60
CDN_FONT = re.compile(r',\s*url\("https?://[^"]*"\) format\("[^"]*"\)')
RENDERS = 2  # journal sections drawn at once (threads)


def units_table(journal: Journal) -> str:
    rows = []
    for unit in journal.view.units.values():
        culprit = ' <span class="culprit">culprit</span>' if unit.name == journal.culprit else ""
        rows.append(
            [
                esc(unit.name) + culprit,
                esc(unit.node),
                esc(unit.tier),
                f'<span class="unit-state unit-{esc(unit.state.value)}">{esc(unit.state.value)}</span>',
                esc(unit.restarts),
                seconds(unit.ready_seconds),
                esc(unit.exit_code),
                esc(unit.reason),
            ]
        )
    headers = ["unit", "node", "tier", "state", "restarts", "launch → ready", "exit", "reason"]
    return table(headers, rows, cls="units")


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
    first = events[0].model_copy(update={"detail": trimmed})
    return [first, *(e for e in events[1:] if e.unit is None or e.unit in drawn)], len(order)


def journal_section(journal: Journal, nonce: str) -> str:
    view = journal.view
    restarts = sum(u.restarts for u in view.units.values())
    culprit = f'<p class="culprit-line">failure culprit: <b>{esc(journal.culprit)}</b></p>' if journal.culprit else ""
    summary = facts(
        [
            ("journal", f"{len(journal.events)} events, job {esc(view.state.value)}"),
            ("time to ready", seconds(journal.ready_seconds)),
            ("restarts", str(restarts)),
        ]
    )
    drawn, units = timeline_events(journal.events)
    note = (
        f'<p class="note">the timeline draws the first {TIMELINE_UNITS} of {units} units; the table has them all</p>'
        if units > TIMELINE_UNITS
        else ""
    )
    # rich's SVG styles its text with a <style> element: it carries the page's CSP nonce; its web
    # font would come from a CDN, which the CSP refuses: the font's local name is kept, the URLs dropped
    svg = svg_text(build_timeline(drawn), width=120).replace("<style>", f'<style nonce="{esc(nonce)}">')
    svg = CDN_FONT.sub("", svg)
    return (
        f'<section class="journal"><h2>units</h2>{summary}{culprit}{units_table(journal)}'
        f'<h2>startup timeline</h2>{note}<div class="timeline">{svg}</div></section>'
    )


def _render(lines: list[str], nonce: str) -> tuple[str, float | None]:
    journal = Journal.of([Event.model_validate_json(line) for line in lines])
    if journal is None:
        return "", None
    return journal_section(journal, nonce), journal.ready_seconds


async def render_in_thread(lines: list[str], nonce: str, limiter: anyio.CapacityLimiter) -> tuple[str, float | None]:
    """The journal section's HTML and the journal's time to ready, computed off the event loop."""
    return await anyio.to_thread.run_sync(_render, lines, nonce, limiter=limiter)
