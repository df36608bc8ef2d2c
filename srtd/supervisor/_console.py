"""What a person watching `srtd run` sees.

- One line per state change, rendered by structlog (`12:00:03 [info] decode_0 ready ...`);
  a unit's info lines may be held a moment and written together (`TerminalConsole`'s `hold`).
- While the job starts: which units wait on what.  On a terminal, a rich Live table
  refreshed in place (refreshed by the job's task, no refresh thread); elsewhere a plain
  line every `plain_interval` seconds.
- At the end: a summary table (unit, node, state, restarts, exit, ready after) and, when
  the job failed, the culprit with its exit or matched line and its last log lines.

rich is imported only to draw on a terminal: off one (under sbatch) `_plain` writes the
same bytes, and a supervisor that draws nothing does not pay for rich.

`LiveConsole`: `srtd run` on a terminal shows the attach view of the whole run instead
of the lines (`--plain` keeps the lines; srtd/supervisor/_live.py).  `NullConsole` prints
nothing (tests, embedding).

On a pipe or a terminal the consoles write through `NonBlockingStream`: a reader that
stops reading never stalls the job (see `_nbstream`); `close()` gives it a moment to
catch up.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Protocol

from srtd._structlog import load as load_structlog
from srtd._value import value_class
from srtd.events import Event
from srtd.launch import ExitStatus
from srtd.supervisor._nbstream import NonBlockingStream, would_block

if TYPE_CHECKING:
    from rich.console import Console as RichConsole
    from rich.live import Live

CLOSE_DRAIN = 2.0  # seconds `close()` waits for a slow reader before dropping the rest


def _never_blocking(stream: IO[str], **options: Any) -> IO[str]:
    return NonBlockingStream(stream, **options) if would_block(stream) else stream  # type: ignore[return-value]


def _dropped_json(lines: int) -> str:
    """`--json`'s marker for dropped lines: a JSON line too, so the stream stays parseable."""
    import json

    return json.dumps({"dropped_lines": lines, "note": "nobody read stdout; events.jsonl has every event"}) + "\n"


def _drain(stream: IO[str]) -> None:
    if isinstance(stream, NonBlockingStream):
        with contextlib.suppress(OSError):  # the reader is gone
            stream.drain(CLOSE_DRAIN)


@value_class
class ProgressRow:
    unit: str
    state: str
    waiting_on: str  # "after etcd (ready)", "probe tcp 127.0.0.1:2379: refused", ""
    seconds: float | None = None  # in this state for


@value_class
class SummaryRow:
    unit: str
    node: str
    state: str
    restarts: int
    exit: str
    ready_after: float | None


class Console(Protocol):
    progress_interval: float | None  # how often the job calls `progress` while starting

    def event(self, event: Event) -> None: ...

    def progress(self, rows: Sequence[ProgressRow]) -> None: ...

    def failure(self, text: str) -> None: ...

    def output(self, unit: str, text: str) -> None: ...

    def summary(self, rows: Sequence[SummaryRow], headline: str) -> None: ...

    def results(self, table: str, data: dict[str, Any]) -> None:
        """A benchmark's results: `table` rendered for people, `data` the results.json document."""
        ...

    def redraw_due(self) -> float | None:
        """Seconds until a change the console holds back is due to be drawn; None when none is held."""
        ...

    def redraw(self) -> None:
        """Draw what is held back (the job calls it once `redraw_due` has passed)."""
        ...

    def close(self) -> None: ...


class _DrawsAtOnce:
    """A console that holds nothing back: every event is written as it comes."""

    def redraw_due(self) -> float | None:
        return None

    def redraw(self) -> None:
        pass


class _StreamWriter:
    stream: IO[str]
    _broken: bool

    def _write(self, text: str) -> None:
        # A console that went away (terminal closed, pipe reader gone) must never take
        # the supervisor down with it, least of all during a teardown: the journal has
        # every event.
        if self._broken:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self._broken = True


class JsonConsole(_DrawsAtOnce, _StreamWriter):
    """`srtd run --json`: every event as a journal line on stdout, then one summary object."""

    progress_interval: float | None = None

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = _never_blocking(stream or sys.stdout, dropped_text=_dropped_json)
        self._results: list[dict[str, Any]] = []  # results.json documents, sent with the summary
        self._broken = False

    def event(self, event: Event) -> None:
        self._write(event.to_line())

    def progress(self, rows: Sequence[ProgressRow]) -> None:
        pass

    def failure(self, text: str) -> None:
        pass  # the events say it; the post-mortem file has the details

    def output(self, unit: str, text: str) -> None:
        pass  # stdout carries journal lines only; the unit's log has its output

    def summary(self, rows: Sequence[SummaryRow], headline: str) -> None:
        import json

        units = [
            {
                "unit": r.unit,
                "node": r.node,
                "state": r.state,
                "restarts": r.restarts,
                "exit": r.exit,
                "ready_after": r.ready_after,
            }
            for r in rows
        ]
        summary: dict[str, Any] = {"summary": headline, "units": units}
        if self._results:
            summary["results"] = self._results
        self._write(json.dumps(summary) + "\n")

    def results(self, table: str, data: dict[str, Any]) -> None:
        # Carried by the summary line: every line before it stays an event.
        self._results.append(data)

    def close(self) -> None:
        _drain(self.stream)


class NullConsole(_DrawsAtOnce):
    progress_interval: float | None = None

    def event(self, event: Event) -> None:
        pass

    def progress(self, rows: Sequence[ProgressRow]) -> None:
        pass

    def failure(self, text: str) -> None:
        pass

    def output(self, unit: str, text: str) -> None:
        pass

    def summary(self, rows: Sequence[SummaryRow], headline: str) -> None:
        pass

    def results(self, table: str, data: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


# job events whose reason is their own words: an after-job hook's outcome, the log file
# system's room, a stray process found
_OWN_WORDS = frozenset({"publisher", "publishers", "power", "log_space", "stray", "node"})


def event_message(event: Event) -> tuple[str, dict[str, Any]]:
    """The readable message and key/values of one event."""
    fields: dict[str, Any] = {}
    subject = event.unit if event.unit is not None else "job"
    if event.detail and isinstance(event.detail.get("result"), dict):
        return f"{subject} result", result_fields(event.detail["result"])
    if event.unit is None and event.detail and _OWN_WORDS & event.detail.keys():
        # an after-job hook's outcome, the log file system's room, a stray process found: its
        # own words, not the job's state meanwhile
        return event.reason or "publishers", {}
    message = f"{subject} {event.state}"
    if (
        event.unit is not None
        and event.state in ("exited", "stopped", "failed")
        and (event.exit_code is not None or event.signal is not None)
    ):
        fields["exit"] = ExitStatus(event.exit_code, event.signal).describe()
    if event.attempt:
        fields["attempt"] = event.attempt
    if event.pid is not None and event.state == "starting":
        fields["pid"] = event.pid
    detail = event.detail or {}
    if event.state == "ready" and "seconds" in detail:
        message += f" after {detail['seconds']:.2f} s"
    if event.state == "waiting" and detail.get("after"):
        fields["after"] = ", ".join(detail["after"])
    if event.unit is None and event.exit_code is not None:
        fields["exit_code"] = event.exit_code
    if event.reason:
        fields["reason"] = event.reason
    if event.state == "failed" and detail.get("ignored"):
        message += " (not critical: the job goes on)"
    return message, fields


def result_fields(point: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of one results point (`detail.result` of a result event)."""
    fields: dict[str, Any] = {}
    if point.get("concurrency") is not None:
        fields["concurrency"] = point["concurrency"]
    if point.get("requests_sent") is not None:
        fields["ok"] = f"{point.get('requests_succeeded', '?')}/{point['requests_sent']}"
    for key, name in (("output_tok_s", "tok/s"), ("output_tok_s_per_gpu", "tok/s/gpu")):
        if point.get(key) is not None:
            fields[name] = round(point[key], 1)
    for key, name in (("ttft_ms", "ttft_p50_ms"), ("tpot_ms", "tpot_p50_ms")):
        value = (point.get(key) or {}).get("p50")
        if value is not None:
            fields[name] = round(value, 1)
    return fields


class _Sink:
    """The structlog "logger": receives the rendered line."""

    def __init__(self, console: TerminalConsole) -> None:
        self._console = console

    def msg(self, message: str) -> None:
        self._console._line(message)

    info = warning = error = debug = critical = msg


class TerminalConsole(_StreamWriter):
    """Lines on `stream` (stderr by default); a live progress view when it is a TTY.

    `hold`: an event's line may wait, until no event came for `quiet` seconds and at most
    `hold` seconds, and is written with the lines that came meanwhile (`redraw`, by the job's
    `keep_drawn` task), or at once before any other line.  A job launching 100 units writes
    their lines once they are launched instead of between the launches, and its first launch
    does not wait for structlog, imported with the first line.  An error is never held, and
    the order of the lines is kept."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        tty: bool | None = None,
        plain_interval: float = 10.0,
        width: int = 120,
        hold: float = 0.0,
        quiet: float = 0.1,
    ) -> None:
        self.stream = _never_blocking(stream if stream is not None else sys.stderr)
        self.tty = self.stream.isatty() if tty is None else tty
        self.progress_interval: float | None = 0.25 if self.tty else plain_interval
        self._width = width
        self._rich_console: RichConsole | None = None
        self._live: Live | None = None
        self._broken = False
        self._results: list[str] = []  # printed under the end-of-run summary
        self._hold, self._quiet = hold, quiet
        self._held: list[tuple[str, str, dict[str, Any]]] = []  # lines not written yet: level, message, fields
        self._held_since = self._held_last = 0.0  # when the first and the last of them came
        self._logger: Any = None

    @property
    def _log(self) -> Any:
        """The structlog logger that renders a line (made with the first line: see `hold`)."""
        if self._logger is None:
            structlog = load_structlog()
            self._logger = structlog.wrap_logger(
                _Sink(self),
                processors=[
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False),
                    structlog.dev.ConsoleRenderer(colors=self.tty, pad_event_to=28),
                ],
            )
        return self._logger

    def redraw_due(self) -> float | None:
        if not self._held:
            return None
        return max(0.0, self._release_at() - time.monotonic())

    def redraw(self) -> None:
        # not while the events keep coming (for at most `hold` s); a timer may fire a hair early
        if self._held and time.monotonic() >= self._release_at() - 0.001:
            self._release()

    def _release_at(self) -> float:
        return min(self._held_since + self._hold, self._held_last + self._quiet)

    def _release(self) -> None:
        """The held lines, written (before any other line)."""
        held, self._held = self._held, []
        for level, message, fields in held:
            getattr(self._log, level)(message, **fields)

    @property
    def _rich(self) -> RichConsole:
        # made on first use: off a terminal only for text `_plain` leaves to rich (rare)
        if self._rich_console is None:
            from rich.console import Console as RichConsole

            self._rich_console = RichConsole(
                file=self.stream,
                force_terminal=self.tty,
                no_color=not self.tty,
                width=None if self.tty else self._width,
                highlight=False,
            )
        return self._rich_console

    def _line(self, text: str) -> None:
        if self.tty:
            from rich.text import Text

            self._print(Text.from_ansi(text))
        else:
            self._write(text + "\n")

    def _print(self, renderable: Any, **kwargs: Any) -> None:
        if self._broken:
            return
        try:
            self._rich.print(renderable, **kwargs)
        except (OSError, ValueError):
            self._broken = True

    def _text(self, text: str) -> None:
        """`text` as it is, on lines of their own (no markup: a unit's words may hold brackets)."""
        from srtd.supervisor import _plain  # (loaded with the first text written)

        plain = None if self.tty else _plain.text(text)
        if plain is not None:
            self._write(plain)
            return
        from rich.text import Text

        self._print(Text(text), soft_wrap=True)

    def event(self, event: Event) -> None:
        message, fields = event_message(event)
        level = "info"
        if event.state == "failed":
            # a failure the job goes on after (a non-critical unit, `detail.ignored`) is a warning
            level = "warning" if (event.detail or {}).get("ignored") else "error"
        elif (event.detail or {}).get("log_space", {}).get("level") in ("low", "full"):
            level = "warning"
        elif (
            event.state == "backoff"
            or "stray" in (event.detail or {})
            or "node" in (event.detail or {})
            or (event.state == "exited" and (event.signal is not None or event.exit_code not in (0, None)))
        ):
            level = "warning"
        if self._hold and level != "error":
            self._held_last = time.monotonic()
            if not self._held:
                self._held_since = self._held_last
            self._held.append((level, message, fields))
            return
        self._release()
        getattr(self._log, level)(message, **fields)

    def progress(self, rows: Sequence[ProgressRow]) -> None:
        self._release()
        if not self.tty:
            waiting = [r for r in rows if r.waiting_on]
            if waiting:
                text = "; ".join(f"{r.unit} {r.state}: {r.waiting_on}" for r in waiting)
                self._log.info("still starting", waiting=text)
            return
        cells = [(row.unit, row.state, _seconds(row.seconds, ".0f", ""), row.waiting_on) for row in rows]
        self._show(_rich_table("starting", ("unit", "state", "for", "waiting on"), cells), transient=True)

    def _show(self, screen: Any, *, transient: bool) -> None:
        """Draw `screen` in place of the last one (a rich Live, drawn by the caller: no thread)."""
        if self._broken:
            return
        try:
            if self._live is None:
                from rich.live import Live

                self._live = Live(screen, console=self._rich, auto_refresh=False, transient=transient)
                self._live.start()
            self._live.update(screen, refresh=True)
        except (OSError, ValueError):
            self._broken = True

    def _stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            try:
                live.stop()
            except (OSError, ValueError):
                self._broken = True

    def failure(self, text: str) -> None:
        self._release()
        self._stop_live()
        self._text(text)

    def output(self, unit: str, text: str) -> None:
        """A line of a unit whose log is mirrored (`unit.echo`)."""
        self._release()
        self._line(f"{unit} | {text}")

    def summary(self, rows: Sequence[SummaryRow], headline: str) -> None:
        self._release()
        self._stop_live()
        columns = ("unit", "node", "state", "restarts", "exit", "ready after")
        cells = [(r.unit, r.node, r.state, str(r.restarts), r.exit, _seconds(r.ready_after, ".1f", "-")) for r in rows]
        from srtd.supervisor import _plain

        plain = None if self.tty else _plain.table(headline, columns, cells, getattr(self.stream, "encoding", None))
        if plain is not None:
            self._write(plain)
        else:
            self._print(_rich_table(headline, columns, cells))
        for text in self._results:
            self._text(text)

    def results(self, table: str, data: dict[str, Any]) -> None:
        self._results.append(table.rstrip("\n"))

    def close(self) -> None:
        self._release()
        self._stop_live()
        _drain(self.stream)


def _seconds(value: float | None, spec: str, unknown: str) -> str:
    return unknown if value is None else f"{value:{spec}} s"


def _rich_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Any:
    """A rich table of text cells: names print as they are, never read as rich markup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title, style="table.title"), show_edge=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*map(Text, row))
    return table


def render_table_text(rows: Sequence[SummaryRow], headline: str) -> str:
    """The summary table as plain text (for the post-mortem file)."""
    buffer = io.StringIO()
    TerminalConsole(buffer, tty=False).summary(rows, headline)
    return buffer.getvalue()
