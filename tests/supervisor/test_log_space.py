"""A full log file system that srtd's own writes would not notice is told: a real tmpfs,
filled while a unit waits to print its ready line."""

from __future__ import annotations

import datetime
import io
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from srtd.events import JobState
from srtd.launch import LocalLauncher
from srtd.supervisor import Job, TerminalConsole, supervise
from srtd.supervisor._diskspace import Level, Space
from srtd.supervisor._journal import Journal
from srtd.supervisor._postmortem import write_postmortem
from srtd.unit import LogProbe, Readiness
from tests.e2e.test_full_disk import fill, small_tmpfs  # noqa: F401  (the fixture)
from tests.supervisor.helpers import PlanMaker, check_journal

MiB = 2**20


@pytest.mark.parametrize(
    ("before", "free", "inodes", "after"),
    [
        (Level.OK, 10 * MiB, True, Level.OK),
        (Level.OK, 4 * MiB, True, Level.LOW),  # below 5% of 100 MiB
        (Level.OK, 0, True, Level.FULL),
        (Level.OK, 50 * MiB, False, Level.FULL),  # no inode left: no new file, no rotated log
        (Level.LOW, 6 * MiB, True, Level.LOW),  # back over the mark, not over the margin: quiet
        (Level.LOW, 8 * MiB, True, Level.OK),
        (Level.FULL, 1 * MiB, True, Level.FULL),  # a byte freed at the edge says nothing
        (Level.FULL, 8 * MiB, True, Level.OK),
    ],
)
def test_levels_leave_with_a_margin(before: Level, free: int, inodes: bool, after: Level) -> None:
    assert Space(free=free, size=100 * MiB, inodes_left=inodes).level(before) is after


def test_the_low_mark_is_capped_for_big_file_systems() -> None:
    assert Space(free=0, size=2**40, inodes_left=True).low_mark == 100 * MiB


@pytest.mark.anyio
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_a_ready_line_lost_to_a_full_disk_is_told(
    small_tmpfs: Path,  # noqa: F811
    maker: PlanMaker,
) -> None:
    assert maker.log_dir == small_tmpfs
    go = maker.root / "go"
    # The unit writes nothing until told; then its ready line meets a full disk.  `sh`
    # goes on after a failed write, as most engines do: the line is lost, silently.
    script = f"while [ ! -e {go} ]; do sleep 0.05; done; echo up; exec sleep 60"
    maker.unit(
        "w",
        argv=("sh", "-c", script),
        marker=False,
        readiness=Readiness(probe=LogProbe(pattern="^up"), timeout_seconds=8),
    )

    @asynccontextmanager
    async def filler(job: Job) -> AsyncIterator[None]:
        async def fill_then_go() -> None:
            while "w" not in job.journal.view.units or job.journal.view.units["w"].pid is None:
                await anyio.sleep(0.02)
            fill(small_tmpfs)
            go.touch()

        async with anyio.create_task_group() as tg:
            tg.start_soon(fill_then_go)
            yield

    out = io.StringIO()
    with anyio.fail_after(60):
        result = await supervise(
            maker.plan(), LocalLauncher(), console=TerminalConsole(out, tty=False), services=[filler]
        )
    full = (
        f"the log file system of {small_tmpfs} (0 B free of 2.0 MiB) is full: units' output to their logs "
        "is lost, and a unit whose ready line cannot be written is never ready"
    )
    lost = "not ready within 8 s (the log file system is full: the line it waits for may have been lost)"
    assert (result.exit_code, result.reason) == (1, f"w failed: {lost}")
    told = [e for e in result.events if e.unit is None and "log_space" in (e.detail or {})]
    assert [(e.state, e.prev, e.reason) for e in told] == [("starting", "starting", full)]
    assert told[0].detail == {"log_space": {"level": "full", "free_bytes": 0, "size_bytes": 2 * MiB}}
    failed = next(e for e in result.events if e.unit == "w" and e.state == "failed")
    assert told[0].seq < failed.seq  # said when it happened, long before the timeout
    said = [line.split(" ", 1)[1] for line in out.getvalue().splitlines() if "] the log file system" in line]
    assert said == [f"[warning  ] {full}"]  # once, as a warning
    assert result.postmortem is None  # no room for it: the console has the culprit
    assert "up" not in (small_tmpfs / "w.log").read_text().split()
    (small_tmpfs / "filler").unlink()
    check_journal(result.journal, ["w"])


def test_the_post_mortem_lists_what_was_said_of_the_log_file_system(tmp_path: Path) -> None:
    journal = Journal(None, ["w"])
    journal.emit(None, JobState.STARTING)
    detail = {"log_space": {"level": "full", "free_bytes": 0, "size_bytes": 2 * MiB}}
    full = "the log file system of /x (0 B free of 2.0 MiB) is full"
    said = journal.emit(None, JobState.STARTING, reason=full, detail=detail)
    journal.emit(None, JobState.FAILED, exit_code=1, reason="w failed")
    path = write_postmortem(
        tmp_path / "postmortem.txt", job="j", exit_code=1, reason="w failed", culprit="w", first_fatal=None,
        view=journal.view, rows=[], logs=[], events=journal.events,
    )  # fmt: skip
    lines = path.read_text().splitlines()
    stamp = datetime.datetime.fromtimestamp(said.ts).strftime("%H:%M:%S.%f")[:-3]
    assert lines[lines.index("first fatal log line: none") + 1] == f"log file system at {stamp}: {full}"
