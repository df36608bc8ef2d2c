"""`srtd timeline`: what made a job slow to start, and how it went down, from its journal.

- the critical chain: the unit whose readiness let the job run, the dependency that
  released it, and so on back to a unit that started at once; each link with its wait
  and its launch -> ready time (from the journal's `waiting` edges and timestamps);
- per unit: time to ready from the job's start, launch -> ready, restarts;
- the teardown by tier;
- a Gantt of every unit's states over time (rich text; `timeline.svg` via rich's own
  SVG export).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from srtd._files import write_under
from srtd._value import value_class
from srtd.attach._view import STATE_STYLE
from srtd.errors import FileRefused
from srtd.events import Event, UnitState

GANTT_WIDTH = 60
# Units drawn as rows of the Gantt (terminal and SVG): a row costs rich a few ms to lay out,
# so thousands of units took tens of seconds; the chain, the teardown and --json keep them all.
MAX_ROWS = 200
SVG_NAME = "timeline.svg"
_EDGE = re.compile(r"^(?P<unit>.+) \((?P<condition>started|ready|succeeded)\)$")


@value_class
class Segment:
    state: str
    start: float  # seconds from the job's start
    end: float


@value_class(frozen=False)
class UnitTimeline:
    name: str
    tier: int | None
    node: str | None
    launched: float | None = None  # first launch, seconds from the job's start
    ready: float | None = None  # first readiness
    launch_to_ready: float | None = None
    waited: float = 0.0  # in `waiting` before the first launch
    restarts: int = 0
    final: str = "pending"
    segments: list[Segment] = field(default_factory=list)


@value_class
class Link:
    """One step of the critical chain: `unit` waited for `after` and then took `took` to be ready."""

    unit: str
    after: str | None  # the edge that released it ("etcd (ready)"), None at the chain's root
    waited: float
    launched: float
    ready: float | None
    took: float | None


@value_class
class TierStop:
    tier: int
    start: float
    end: float
    units: list[str]


@value_class
class ResultMark:
    """A benchmark point journaled at `at` (a result event, docs/results.md)."""

    unit: str
    at: float
    point: dict[str, Any]


@value_class
class NodeMark:
    """A node event at `at` (docs/events.md, "Node events"): lost, replaced, ...; `reason` in words."""

    at: float
    node: str
    what: str
    spare: str | None
    reason: str


@value_class(frozen=False)
class Timeline:
    name: str
    job_id: str
    state: str
    duration: float
    running: float | None  # when the job became `running`
    units: list[UnitTimeline]
    chain: list[Link]
    teardown: list[TierStop]
    results: list[ResultMark] = field(default_factory=list)
    nodes: list[NodeMark] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _rel(ts: float, t0: float) -> float:
    """Seconds from the job's start, to the millisecond (the journal's own precision is finer)."""
    return round(ts - t0, 3)


def _first(mine: Sequence[Event], state: str, before: float | None = None) -> Event | None:
    """The first of one unit's events in `state` (at `before` or earlier)."""
    for e in mine:
        if e.state == state and (before is None or e.ts <= before):
            return e
    return None


def _by_unit(events: Sequence[Event]) -> dict[str, list[Event]]:
    """Each unit's events, in order: one pass, so that a job of thousands of units is not
    read once per unit."""
    mine: dict[str, list[Event]] = {}
    for e in events:
        if e.unit is not None:
            mine.setdefault(e.unit, []).append(e)
    return mine


def build(events: Sequence[Event]) -> Timeline:
    if not events:
        raise ValueError("empty journal")
    head = events[0]
    detail = head.detail or {}
    t0 = head.ts
    end = events[-1].ts
    order: list[str] = list(detail.get("units", [])) or sorted({e.unit for e in events if e.unit})
    tiers: dict[str, int] = detail.get("tiers", {})
    nodes: dict[str, str] = detail.get("nodes", {})
    running = next((e.ts for e in events if e.unit is None and e.state == "running"), None)
    job_state = next((e.state for e in reversed(events) if e.unit is None), "starting")

    by_unit = _by_unit(events)
    units: dict[str, UnitTimeline] = {}
    for name in order:
        mine = by_unit.get(name, [])
        line = UnitTimeline(name, tiers.get(name), nodes.get(name))
        for i, e in enumerate(mine):
            stop = mine[i + 1].ts if i + 1 < len(mine) else end
            line.segments.append(Segment(e.state, _rel(e.ts, t0), _rel(stop, t0)))
            line.restarts = max(line.restarts, e.attempt or 0)
            line.final = e.state
        launch = _first(mine, "starting")
        ready = _first(mine, "ready")
        if launch is not None:
            line.launched = _rel(launch.ts, t0)
            wait = _first(mine, "waiting", before=launch.ts)
            line.waited = round(launch.ts - wait.ts, 3) if wait is not None else 0.0
        if ready is not None:
            line.ready = _rel(ready.ts, t0)
            line.launch_to_ready = (ready.detail or {}).get("seconds", line.ready - (line.launched or 0.0))
        units[name] = line

    return Timeline(
        name=str(detail.get("job", "job")),
        job_id=str(detail.get("job_id", "?")),
        state=job_state,
        duration=_rel(end, t0),
        running=_rel(running, t0) if running is not None else None,
        units=list(units.values()),
        chain=_chain(events, by_unit, units, running),
        teardown=_teardown(events, tiers, t0),
        results=[
            ResultMark(e.unit, _rel(e.ts, t0), e.detail["result"])
            for e in events
            if e.unit is not None and e.detail and isinstance(e.detail.get("result"), dict)
        ],
        nodes=_node_marks(events, t0),
    )


def _node_marks(events: Sequence[Event], t0: float) -> list[NodeMark]:
    marks = []
    for e in events:
        fact = (e.detail or {}).get("node") if e.unit is None else None
        if isinstance(fact, dict) and isinstance(fact.get("node"), str):
            spare = fact.get("spare")
            what = str(fact.get("what", "?"))
            marks.append(
                NodeMark(_rel(e.ts, t0), fact["node"], what, spare if isinstance(spare, str) else None, e.reason or "")
            )
    return marks


def _condition_time(mine: Sequence[Event], condition: str, before: float) -> float | None:
    state = {"started": "starting", "ready": "ready", "succeeded": "stopped"}[condition]
    hit = _first(mine, state, before=before)
    return hit.ts if hit is not None else None


def _chain(
    events: Sequence[Event], by_unit: dict[str, list[Event]], units: dict[str, UnitTimeline], running: float | None
) -> list[Link]:
    """From the last unit to become ready (before the job ran) back along its edges."""
    limit = running if running is not None else events[-1].ts
    readies = [e for e in events if e.unit in units and e.state == "ready" and e.ts <= limit]
    if not readies:
        return []
    current: str | None = max(readies, key=lambda e: (e.ts, e.seq)).unit
    links: list[Link] = []
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        line = units[current]
        mine = by_unit.get(current, [])
        launch = _first(mine, "starting")
        if launch is None or line.launched is None:
            break
        wait = _first(mine, "waiting", before=launch.ts)
        released_by: tuple[float, str, str] | None = None
        for edge in (wait.detail or {}).get("after", []) if wait is not None else []:
            match = _EDGE.match(edge)
            if match is None or match["unit"] not in units:
                continue
            at = _condition_time(by_unit.get(match["unit"], []), match["condition"], launch.ts)
            if at is not None and (released_by is None or at > released_by[0]):
                released_by = (at, match["unit"], edge)
        links.append(
            Link(
                unit=current,
                after=released_by[2] if released_by else None,
                waited=line.waited,
                launched=line.launched,
                ready=line.ready,
                took=line.launch_to_ready,
            )
        )
        current = released_by[1] if released_by else None
    links.reverse()
    return links


def _teardown(events: Sequence[Event], tiers: dict[str, int], t0: float) -> list[TierStop]:
    stopping = next((e.seq for e in events if e.unit is None and e.state == "stopping"), None)
    if stopping is None:
        return []
    spans: dict[int, list[float]] = {}
    names: dict[int, dict[str, None]] = {}  # each tier's units, in order, each once
    for e in events:
        if e.unit is None or e.seq < stopping or e.state not in ("stopping", "stopped", "failed"):
            continue
        tier = tiers.get(e.unit, 0)
        spans.setdefault(tier, []).append(e.ts)
        names.setdefault(tier, {})[e.unit] = None
    return [TierStop(t, _rel(min(spans[t]), t0), _rel(max(spans[t]), t0), list(names[t])) for t in sorted(spans)]


# ---------------------------------------------------------------- rendering


def _seconds(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "-"


def _bar(line: UnitTimeline, duration: float, width: int, marks: Sequence[float] = ()) -> Text:
    text = Text()
    step = duration / width if duration > 0 else 0.0
    marked = {min(int(m / step), width - 1) for m in marks} if step else set()
    for i in range(width):
        if i in marked:
            text.append("◆", style="bold magenta")  # a benchmark point was written here
            continue
        t = (i + 0.5) * step
        state = next((s.state for s in line.segments if s.start <= t < s.end), None)
        if state is None and line.segments and t >= line.segments[-1].end:
            state = line.segments[-1].state if line.segments[-1].state in ("stopped", "failed") else None
        if state is None or state in ("stopped",):
            text.append(" ")
        else:
            text.append("█", style=STATE_STYLE.get(UnitState(state), ""))
    return text


def gantt_width(columns: int) -> int:
    """How wide the Gantt can be next to the table's other columns (about 100 of them)."""
    return max(20, min(GANTT_WIDTH, columns - 100))


def render_timeline(timeline: Timeline, width: int = GANTT_WIDTH) -> RenderableType:
    title = f"{timeline.name} (job {timeline.job_id}): {timeline.state} after {timeline.duration:.2f} s"
    if timeline.running is not None:
        title += f", running at +{timeline.running:.2f} s"
    table = Table(title=title, show_edge=False)
    for column in ("unit", "tier", "waited", "launched", "ready at", "launch→ready", "restarts", "end"):
        table.add_column(column, justify="right" if column not in ("unit", "end") else "left")
    table.add_column(f"0 s {'states':^{width - 12}} {timeline.duration:.1f} s", no_wrap=True)
    marks: dict[str, list[float]] = {}
    for mark in timeline.results:
        marks.setdefault(mark.unit, []).append(mark.at)
    for line in timeline.units[:MAX_ROWS]:
        table.add_row(
            line.name,
            str(line.tier) if line.tier is not None else "-",
            _seconds(line.waited) if line.waited else "-",
            f"+{line.launched:.2f} s" if line.launched is not None else "-",
            f"+{line.ready:.2f} s" if line.ready is not None else "-",
            _seconds(line.launch_to_ready),
            str(line.restarts),
            line.final,
            _bar(line, timeline.duration, width, marks.get(line.name, ())),
        )
    if len(timeline.units) > MAX_ROWS:
        left = len(timeline.units) - MAX_ROWS
        table.add_row(f"({left} more)", *[""] * 6, "not drawn", "srtd timeline --json has every unit")
    legend = Text("  ")
    for state in ("waiting", "starting", "ready", "exited", "backoff", "stopping", "failed"):
        legend.append("█", style=STATE_STYLE[UnitState(state)]).append(f" {state}  ")
    chain = Text("critical chain (what the job waited for before it ran):\n", style="bold")
    if not timeline.chain:
        chain.append("  no unit became ready\n")
    for link in timeline.chain:
        chain.append(f"  +{link.launched:7.2f} s  {link.unit}")
        if link.after:
            chain.append(f" launched after {link.after} (waited {link.waited:.2f} s)")
        else:
            chain.append(" launched at once")
        if link.ready is not None:
            chain.append(f", ready at +{link.ready:.2f} s ({_seconds(link.took)} to ready)")
        chain.append("\n")
    if timeline.running is not None:
        chain.append(f"  +{timeline.running:7.2f} s  job running\n")
    teardown = Text("teardown by tier:\n", style="bold")
    if not timeline.teardown:
        teardown.append("  none (the job did not stop)\n")
    for stop in timeline.teardown:
        teardown.append(
            f"  tier {stop.tier}: +{stop.start:.2f} s .. +{stop.end:.2f} s ({stop.end - stop.start:.2f} s): "
            f"{', '.join(stop.units)}\n"
        )
    parts: list[RenderableType] = [table, legend, Text(""), chain, teardown]
    if timeline.results:
        parts.append(_results_text(timeline.results))
    if timeline.nodes:
        said = Text("nodes:\n", style="bold")
        for node in timeline.nodes:
            said.append(f"  +{node.at:7.2f} s  {node.node} {node.what}: {node.reason}\n")
        parts.append(said)
    return Group(*parts)


def _results_text(marks: Sequence[ResultMark]) -> Text:
    text = Text("benchmark points (◆):\n", style="bold")
    for mark in marks:
        p = mark.point
        text.append(f"  +{mark.at:7.2f} s  {mark.unit}")
        if p.get("concurrency") is not None:
            text.append(f" concurrency {p['concurrency']}")
        text.append(f": {p.get('requests_succeeded', '?')}/{p.get('requests_sent', '?')} ok")
        if p.get("output_tok_s") is not None:
            text.append(f", {p['output_tok_s']:.1f} tok/s")
        tpot = (p.get("tpot_ms") or {}).get("p50")
        if tpot is not None:
            text.append(f", TPOT p50 {tpot:.1f} ms")
        text.append("\n")
    return text


def svg_text(timeline: Timeline, width: int = 160) -> str:
    """The timeline as an SVG document (rich's own export), for a file or a web page."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    console.print(render_timeline(timeline, width=gantt_width(width)))
    return console.export_svg(title=f"srtd timeline: {timeline.name} (job {timeline.job_id})")


def write_svg(timeline: Timeline, path: Path, width: int = 160) -> Path:
    """The SVG beside the journal, replacing a regular file only (a link planted there is refused)."""
    write_under(path.parent, path, svg_text(timeline, width), error=FileRefused)
    return path
