"""The console stream never blocks the supervisor: a reader that stops reading costs lines, not the job."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from srtd.supervisor._console import CLOSE_DRAIN, JsonConsole, TerminalConsole
from srtd.supervisor._nbstream import NonBlockingStream, would_block

MARKER = re.compile(r"\[srtd: (\d+) console lines dropped while nobody read them; events.jsonl has every event\]")
F_SETPIPE_SZ = 1031


@contextlib.contextmanager
def never_hangs(seconds: float = 60.0) -> Iterator[None]:
    """A write that blocks would hang the test run: fail it instead."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError("a console write blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def small_pipe() -> Iterator[tuple[int, io.TextIOWrapper]]:
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)  # one page: fills after a few dozen lines
    os.set_blocking(r, False)
    writer = os.fdopen(w, "w")
    try:
        yield r, writer
    finally:
        with contextlib.suppress(OSError):
            writer.close()
        os.close(r)


def read_all(r: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(r, 65536)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def check_sequence(text: str, total: int) -> int:
    """Lines `line <n>` in order with gaps only where a marker says exactly how many; lines dropped."""
    expected, dropped = 0, 0
    for line in text.splitlines():
        marker = MARKER.fullmatch(line)
        if marker:
            expected += int(marker.group(1))
            dropped += int(marker.group(1))
            continue
        assert line == f"line {expected:05d} " + "x" * 80, line
        expected += 1
    assert expected == total
    return dropped


def test_a_reader_that_stops_loses_marked_lines_and_never_blocks_the_writer() -> None:
    with small_pipe() as (r, writer), never_hangs():
        stream = NonBlockingStream(writer, limit=20_000)
        for n in range(3000):  # about 270 KB into a 4 KB pipe nobody reads
            stream.write(f"line {n:05d} " + "x" * 80 + "\n")
        assert stream.pending <= 20_000
        received = read_all(r)
        while stream.pending:  # the reader is back: everything left arrives
            stream.flush()
            received += read_all(r)
    dropped = check_sequence(received.decode(), 3000)
    assert 0 < dropped < 3000


def test_drain_gives_up_after_its_time_and_keeps_what_it_could_not_write() -> None:
    with small_pipe() as (_r, writer), never_hangs():
        stream = NonBlockingStream(writer)
        stream.write("y" * 10_000 + "\n")
        t0 = time.monotonic()
        assert stream.drain(0.3) is False
        assert 0.25 < time.monotonic() - t0 < 5.0
        assert stream.pending > 0


def test_a_gone_reader_is_an_error_the_console_swallows() -> None:
    r, w = os.pipe()
    os.close(r)
    writer = os.fdopen(w, "w")
    previous = signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it
    try:
        stream = NonBlockingStream(writer)
        with pytest.raises(BrokenPipeError):
            stream.write("nobody\n")
        console = TerminalConsole(writer, tty=False)
        console.output("u", "nobody reads this")  # no exception: the job goes on
        console.close()
    finally:
        signal.signal(signal.SIGPIPE, previous)
        with contextlib.suppress(OSError):
            writer.close()


def test_the_terminal_console_on_an_unread_pipe_returns_and_closes_in_bounded_time() -> None:
    with small_pipe() as (r, writer), never_hangs():
        console = TerminalConsole(writer, tty=False)
        assert isinstance(console.stream, NonBlockingStream)
        for n in range(2000):
            console.output("bench", f"row {n}")
        t0 = time.monotonic()
        console.close()
        assert time.monotonic() - t0 < CLOSE_DRAIN + 10.0  # generous: the drain gives up, it does not hang
        received = read_all(r).decode().splitlines()
    # what the pipe took, from the first line on, in order (the rest was given up at close)
    assert received
    assert received == [f"bench | row {n}" for n in range(len(received))]


def test_json_console_marks_dropped_lines_with_a_json_line() -> None:
    with small_pipe() as (r, writer), never_hangs():
        console = JsonConsole(writer)
        assert isinstance(console.stream, NonBlockingStream)
        for n in range(150_000):  # about 5.5 MB of summaries: past the 4 MiB kept
            console.summary([], f"s{n:06d}")
        received = read_all(r)
        while console.stream.pending:
            console.stream.flush()
            received += read_all(r)
    docs = [json.loads(line) for line in received.decode().splitlines()]  # every line parses
    markers = [d for d in docs if "dropped_lines" in d]
    assert markers
    assert sum(m["dropped_lines"] for m in markers) + len(docs) - len(markers) == 150_000
    assert docs[-1] == {"summary": "s149999", "units": []}


def test_only_pipes_sockets_and_terminals_are_wrapped(tmp_path: Path) -> None:
    assert not would_block(io.StringIO())
    with open(tmp_path / "out.txt", "w") as f:
        assert not would_block(f)  # a batch job's output file: written directly, nothing dropped
        assert TerminalConsole(f, tty=False).stream is f
    with small_pipe() as (_r, writer):
        assert would_block(writer)
