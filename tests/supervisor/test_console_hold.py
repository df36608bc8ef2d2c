"""The lines console's `hold`: a starting job's lines wait for a pause in its events (at most
`hold` seconds), then come out in order; an error, or any other output, comes at once after
what was held.  `srtd run` holds its lines so that its launches come first."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest

from srtd.events import Event
from srtd.supervisor import TerminalConsole


class Clock:
    """time.monotonic for the console, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("srtd.supervisor._console.time.monotonic", fake)
    return fake


def ev(seq: int, unit: str | None, state: str, **facts: object) -> Event:
    return Event(seq=seq, ts=0.0, unit=unit, state=state, **facts)  # type: ignore[arg-type]


def words(out: io.StringIO) -> list[str]:
    """Each line without its time stamp and level: `unit state`."""
    return [" ".join(line.split("]", 1)[1].split()[:2]) for line in out.getvalue().splitlines()]


def test_lines_wait_for_a_pause_in_the_events_then_come_in_order(clock: Clock) -> None:
    out = io.StringIO()
    console = TerminalConsole(out, tty=False, hold=1.0, quiet=0.125)
    console.event(ev(1, None, "starting"))
    console.event(ev(2, "a", "starting", pid=10))
    assert out.getvalue() == ""
    assert console.redraw_due() == 0.125
    clock.now += 0.0625
    console.event(ev(3, "b", "starting", pid=11))  # the burst goes on: the pause starts again
    assert console.redraw_due() == 0.125
    clock.now += 0.0625
    console.redraw()  # not due: nothing is written
    assert out.getvalue() == ""
    clock.now += 0.0625
    assert console.redraw_due() == 0.0
    console.redraw()
    assert words(out) == ["job starting", "a starting", "b starting"]
    assert console.redraw_due() is None


def test_a_burst_that_never_pauses_is_written_after_hold_seconds(clock: Clock) -> None:
    out = io.StringIO()
    console = TerminalConsole(out, tty=False, hold=1.0, quiet=0.125)
    for i in range(30):
        console.event(ev(i, f"u{i}", "starting", pid=100 + i))
        clock.now += 0.0625  # 1.875 s of events, never a pause of 0.125 s
        if (due := console.redraw_due()) == 0.0:
            console.redraw()
            break
        assert due is not None
        assert due <= 0.125
    assert words(out) == [f"u{i} starting" for i in range(16)]  # the first second's lines


def test_an_error_is_written_at_once_after_the_held_lines(clock: Clock) -> None:
    out = io.StringIO()
    console = TerminalConsole(out, tty=False, hold=1.0, quiet=0.125)
    console.event(ev(1, "a", "starting", pid=10))
    console.event(ev(2, "a", "failed", exit_code=3))
    assert words(out) == ["a starting", "a failed"]
    assert "[error" in out.getvalue().splitlines()[1]


@pytest.mark.parametrize(
    "then",
    [
        lambda c: c.failure("it broke"),
        lambda c: c.output("a", "a line of a"),
        lambda c: c.close(),
        lambda c: c.summary([], "job: done"),
    ],
)
def test_any_other_output_comes_after_the_held_lines(clock: Clock, then: object) -> None:
    out = io.StringIO()
    console = TerminalConsole(out, tty=False, hold=1.0, quiet=0.125)
    console.event(ev(1, "a", "starting", pid=10))
    then(console)  # type: ignore[operator]
    assert out.getvalue().splitlines()[0].split("]", 1)[1].split()[:2] == ["a", "starting"]


def test_without_hold_every_line_is_written_at_once() -> None:
    out = io.StringIO()
    console = TerminalConsole(out, tty=False)
    console.event(ev(1, "a", "starting", pid=10))
    assert words(out) == ["a starting"]
    assert console.redraw_due() is None


def test_structlog_is_imported_with_the_first_line() -> None:
    """The supervisor's modules log through srtd._structlog: structlog waits for a line."""
    code = textwrap.dedent(
        """
        import io, sys
        import srtd.launch._local, srtd.launch._strays, srtd.supervisor._job
        from srtd.supervisor import TerminalConsole
        from srtd.events import Event
        console = TerminalConsole(io.StringIO(), tty=False, hold=1.0)
        console.event(Event(seq=1, ts=0.0, unit="a", state="starting"))
        before = "structlog" in sys.modules
        console.close()
        print(before, "structlog" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
