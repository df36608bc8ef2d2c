"""A full log file system under a running job: a real tmpfs as --log-dir, filled while it runs.

srtd keeps deciding (a worker killed while the disk is full is restarted), says once
which file it could not write, catches the journal up when space returns, and ends
with the exit code it would have had.  No traceback.
"""

from __future__ import annotations

import errno
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from srtd.supervisor import read_journal
from tests.command import ctrl_c, reap
from tests.e2e.test_local_run import RESTART, srtd
from tests.supervisor.helpers import assert_cancelled_by_sigint, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "logs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path) -> Path:
    """Write zeros until the file system says it is full."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as f:
        block = b"\0" * 65536
        while True:
            try:
                f.write(block)
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
                break
        for size in (4096, 512, 1):  # the last few bytes too
            while True:
                try:
                    f.write(b"\0" * size)
                except OSError:
                    break
    return filler


class Output:
    """What a running srtd prints, read as it comes (its journal cannot be, while the disk
    is full), so that the test waits for what it needs to see, not for a guessed time."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.text = ""

    def until(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.text, re.MULTILINE)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {pattern!r} in {timeout:g} s:\n{self.text}")
            if select.select([self.fd], [], [], min(left, 1.0))[0]:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise AssertionError(f"srtd ended without a line matching {pattern!r}:\n{self.text}")
                self.text += chunk.decode(errors="replace")
        return found

    def rest(self, out: str) -> str:
        return self.text + out


def test_a_full_log_dir_delays_the_journal_not_the_decisions(small_tmpfs: Path, tmp_path: Path) -> None:
    log_dir = small_tmpfs
    # Quick, many restarts: a page of tmpfs holds ~20 events, so the journal must outgrow it
    recipe = tmp_path / "restart.yaml"
    text = RESTART.read_text().replace("max_restarts: 3", "max_restarts: 40")
    recipe.write_text(
        text.replace("backoff_seconds: 1", "backoff_seconds: 0.1").replace(
            "max_backoff_seconds: 8", "max_backoff_seconds: 0.2"
        )
    )
    proc = srtd("run", str(recipe), "--log-dir", str(log_dir))
    output = Output(proc)
    try:
        seen = wait_for(log_dir, lambda es: any(e.unit is None and e.state == "running" for e in es))
        written_before = (log_dir / "events.jsonl").read_text()
        pid = next(e.pid for e in seen if e.unit == "agg_1_node1" and e.state == "starting")
        assert pid is not None
        filler = fill(log_dir)
        full_at = time.time()
        # srtd's journal still fits in its page: the look at the file system tells it
        output.until(r"\] the log file system of .* is full: ")
        os.kill(pid, signal.SIGKILL)
        # restarted while the disk is full; the new attempt dies of it (below) and is
        # restarted again, until the journal outgrows its page and cannot be written
        output.until(r"agg_1_node1 backoff .*attempt=2 ")
        output.until(r"^srtd: cannot write ")
        filler.unlink()
        freed_at = time.time()
        output.until(r"\] the log file system of .* has room again$")
        output.until(r"^srtd: events\.jsonl is written again \(")
        out = output.rest(ctrl_c(proc))
    finally:
        reap(proc)
    assert "Traceback" not in out
    assert_cancelled_by_sigint(proc.returncode, out, log_dir)  # as without the full disk
    journal = read_journal(log_dir / "events.jsonl")
    # what was on disk before stays, byte for byte; then every later event, caught up
    assert (log_dir / "events.jsonl").read_text().startswith(written_before)
    assert [e.seq for e in journal] == list(range(1, len(journal) + 1))
    mine = [(e.state, e.attempt) for e in journal if e.unit == "agg_1_node1" and full_at <= e.ts < freed_at]
    # killed while the disk is full: restarted; the new attempt, whose own log cannot be
    # written, exits before it is ready (the toy worker dies on ENOSPC) and is restarted again
    assert mine[:5] == [("exited", 0), ("backoff", 1), ("starting", 1), ("exited", 1), ("backoff", 2)], out
    said = [line for line in out.splitlines() if "cannot write" in line]
    assert said == [
        f"srtd: cannot write {log_dir / 'events.jsonl'}: No space left on device; "
        "the journal is kept in memory until it can be written"
    ]
    told = [(e.detail or {})["log_space"]["level"] for e in journal if "log_space" in (e.detail or {})]
    assert told == ["full", "ok"]  # each said once, and in the journal once it has room
