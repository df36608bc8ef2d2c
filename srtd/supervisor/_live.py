"""`LiveConsole`: `srtd run` on a terminal shows the attach view of the whole run, redrawn in
place, instead of the lines console's lines (srtd/supervisor/_console.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from srtd.events import Event
from srtd.supervisor._console import TerminalConsole


class LiveConsole(TerminalConsole):
    """`srtd run` on a terminal: the attach view of the whole run, redrawn in place, then the summary.

    `render(events)` makes the screen from the events so far (srtd.attach's view; the
    supervisor does not import attach, so the CLI passes it in).  Drawn by the job's
    task as events come: at once for a job event and for a unit reaching a state it
    rests in (ready, backoff, failed), otherwise at most every `refresh` seconds (a change
    held back is drawn once due, by the job's `keep_drawn` task, also when no event
    follows it); the last screen stays when the job ends, the summary below it.  Only ever on a TTY:
    into a pipe `srtd run` keeps `TerminalConsole`'s lines.
    """

    _RESTING = frozenset({"ready", "backoff", "failed"})

    def __init__(self, render: Callable[[Sequence[Event]], Any], stream: IO[str] | None = None, refresh: float = 0.1):
        super().__init__(stream, tty=True)
        self.progress_interval = None  # the view shows what each unit waits on
        self._render = render
        self._refresh = refresh
        self._events: list[Event] = []
        self._drawn = -float("inf")
        self._dirty = False

    def event(self, event: Event) -> None:
        self._events.append(event)
        self._dirty = True
        now = time.monotonic()
        if event.unit is None or event.state in self._RESTING or now - self._drawn >= self._refresh:
            self._draw(now)

    def redraw_due(self) -> float | None:
        return max(0.0, self._drawn + self._refresh - time.monotonic()) if self._dirty else None

    def redraw(self) -> None:
        if self._dirty:
            self._draw(time.monotonic())

    def _draw(self, now: float) -> None:
        if not self._broken:
            self._show(self._render(self._events), transient=False)
        self._drawn, self._dirty = now, False

    def _stop_live(self) -> None:
        if self._live is not None and self._dirty:
            self._draw(time.monotonic())
        super()._stop_live()

    def output(self, unit: str, text: str) -> None:
        from rich.text import Text

        self._print(Text(f"{unit} | {text}"))  # above the live view
