"""The attach view: a table of units and a pane of the latest events.

`render_view` depends only on the folded `JobView` and the events, never on the clock,
so the live view of a job and the replay of its journal end on the same screen.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from srtd.attach._protocol import event_of
from srtd.events import Event, JobView, UnitState
from srtd.launch import ExitStatus
from srtd.supervisor import event_message

EVENT_PANE = 12  # events shown under the table

# The one table of the states' colours (the view, the timeline and its legend): each state a
# colour of its own, so that an exit, a backoff and a failure tell apart on the timeline's bars.
STATE_STYLE = {
    UnitState.PENDING: "dim",
    UnitState.WAITING: "yellow",
    UnitState.STARTING: "cyan",
    UnitState.READY: "green",
    UnitState.EXITED: "dark_orange",
    UnitState.BACKOFF: "magenta",
    UnitState.STOPPING: "bright_blue",
    UnitState.STOPPED: "dim",
    UnitState.FAILED: "bold red",
}


def clock_time(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) if ts is not None else "-"


def event_line(event: Event) -> str:
    message, fields = event_message(event)
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    return f"{clock_time(event.ts)} #{event.seq} {message}" + (f"  {extra}" if extra else "")


def _last_event(view: JobView, name: str) -> str:
    unit = view.units[name]
    if unit.state is UnitState.WAITING and unit.waiting_on:
        return f"{clock_time(unit.updated_at)} after {', '.join(unit.waiting_on)}"
    text = clock_time(unit.updated_at)
    if unit.reason and unit.state is not UnitState.READY:
        text += f" {unit.reason}"
    return text


def units_table(view: JobView, order: Sequence[str] = (), note: str | None = None) -> Table:
    """The units' table; `note` follows the job's state in the title (a dead job's)."""
    title = f"{view.name or 'job'} (job {view.job_id or '?'}): {view.state.value}"
    if view.exit_code is not None:
        title += f", exit code {view.exit_code}"
    if note:
        title += f" ({note})"
    table = Table(title=title, show_edge=False, expand=False)
    table.add_column("unit", no_wrap=True)
    for column in ("node", "state", "pid / step", "restarts", "ready after", "exit", "last event"):
        table.add_column(column, overflow="fold")
    names = [n for n in order if n in view.units] + [n for n in view.units if n not in order]
    for name in names:
        unit = view.units[name]
        status = (
            ExitStatus(unit.exit_code, unit.signal).describe()
            if unit.exit_code is not None or unit.signal is not None
            else "-"
        )
        ready = f"{unit.ready_seconds:.1f} s" if unit.ready_seconds is not None else "-"
        table.add_row(
            name,
            unit.node or "-",
            Text(unit.state.value, style=STATE_STYLE.get(unit.state, "")),
            unit.step or (str(unit.pid) if unit.pid is not None else "-"),
            str(unit.restarts),
            ready,
            status,
            _last_event(view, name),
        )
    return table


def render_view(
    view: JobView, events: Sequence[Event], order: Sequence[str] = (), note: str | None = None
) -> RenderableType:
    """The table, then the last `EVENT_PANE` events."""
    recent = list(events)[-EVENT_PANE:]
    pane = Text("\n".join(event_line(e) for e in recent) or "no events yet", no_wrap=True, overflow="ellipsis")
    return Group(units_table(view, order, note), Panel(pane, title="events", title_align="left"))


class RunView:
    """`srtd run`'s live screen (`LiveConsole`'s renderer): the view of the events so far.

    Folds only the events it has not seen, so a long run costs one `apply` per event.
    """

    def __init__(self) -> None:
        self.view: JobView | None = None
        self.order: list[str] = []
        self.seen = 0

    def __call__(self, events: Sequence[Event]) -> RenderableType:
        if self.view is None:
            self.order = list((events[0].detail or {}).get("units", [])) if events else []
            self.view = JobView.fold([], self.order)
        for event in events[self.seen :]:
            self.view.apply(event)
        self.seen = len(events)
        return render_view(self.view, events, self.order)


class LiveView:
    """`srtd attach`'s live screen: the job folded from its subscription, drawn in place.

    A subscription from 0 begins with the journal's replay up to the snapshot's `seq`
    (`replayed`): the first screen is drawn once that is applied, never the half-folded
    job before it.  Then a change is drawn at most every `refresh` seconds, and at once
    when the stream goes quiet (`take(None)`) or ends, so the last event of a burst is on
    screen without waiting for the next one (a quiet job may send none for hours).
    """

    def __init__(self, console: Console, order: Sequence[str], replayed: int, refresh: float) -> None:
        self._order = list(order)
        self.view = JobView.fold([], self._order)
        self.events: deque[Event] = deque(maxlen=EVENT_PANE)  # the pane's: a live view runs for days
        self._console = console
        self._replayed = replayed
        self._refresh = refresh
        self._live: Live | None = None
        self._drawn = -float("inf")
        self._changed = True

    def take(self, message: Mapping[str, Any] | None) -> None:
        """One message of the subscription, or None: nothing came for a while."""
        if message is not None:
            kind = message.get("type")
            if kind == "event":
                event = event_of(message)
                if event.seq > self.view.seq:  # a resumed subscription may repeat the snapshot's events
                    self.view.apply(event)
                    self.events.append(event)
                    self._changed = True
            replaying = self.view.seq < self._replayed
            if kind != "end" and (replaying or time.monotonic() - self._drawn < self._refresh):
                return
        self._draw()

    def _draw(self) -> None:
        if not self._changed:
            return
        screen = render_view(self.view, self.events, self._order)
        if self._live is None:
            self._live = Live(screen, console=self._console, auto_refresh=False, transient=False)
            self._live.start(refresh=True)
        else:
            self._live.update(screen, refresh=True)
        self._drawn, self._changed = time.monotonic(), False

    def close(self) -> None:
        """Draw what is not drawn yet and leave the last screen."""
        self._draw()
        if self._live is not None:
            self._live.stop()
