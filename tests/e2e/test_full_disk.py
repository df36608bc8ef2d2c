"""A full log file system under a running job: a real tmpfs as --log-dir, filled while it runs.

srtd keeps deciding (a worker killed while the disk is full is restarted), says once
which file it could not write, catches the journal up when space returns, and ends
with the exit code it would have had.  No traceback.
"""

from __future__ import annotations

import errno
import os
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
    try:
        seen = wait_for(log_dir, lambda es: any(e.unit is None and e.state == "running" for e in es))
        written_before = (log_dir / "events.jsonl").read_text()
        pid = next(e.pid for e in seen if e.unit == "agg_1_node1" and e.state == "starting")
        assert pid is not None
        filler = fill(log_dir)
        full_at = time.time()
        os.kill(pid, signal.SIGKILL)
        time.sleep(8)  # backoff 1 s, then the worker's start: all while the disk is full
        filler.unlink()
        freed_at = time.time()
        out = ctrl_c(proc)
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
    assert "srtd: events.jsonl is written again (" in out
