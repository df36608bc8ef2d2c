"""A node check started before the supervisor loads (srtd/launch/_early.py): it reports what
`slurm_tool` reports for the same argv, the local launcher takes it instead of running the
check again, and one nobody asked for (or that outran its time) is killed and reaped."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from srtd.launch import EarlyCheck, LocalLauncher, slurm_tool

pytestmark = pytest.mark.anyio


def gone(pid: int) -> bool:
    """No such process, not even a zombie (it was reaped)."""
    return not os.path.exists(f"/proc/{pid}")


def strip_argv(run: object) -> tuple[object, ...]:
    return (run.code, run.out, run.err, run.missing)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "argv",
    [
        ["sh", "-c", "echo out; echo err >&2; exit 3"],
        ["sh", "-c", "exit 0"],
        ["srtd-no-such-program-anywhere", "--x"],
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
    ],
)
async def test_an_early_check_reports_what_slurm_tool_reports(argv: list[str]) -> None:
    early = await EarlyCheck(argv).result(10.0)
    later = await slurm_tool(argv, 10.0)
    assert early.argv == later.argv == tuple(argv)
    assert strip_argv(early) == strip_argv(later)


async def test_output_beyond_a_pipes_size_never_blocks_the_check() -> None:
    argv = [sys.executable, "-c", "import sys; sys.stdout.write('x' * 300_000); sys.stderr.write('e' * 100_000)"]
    run = await EarlyCheck(argv).result(10.0)
    assert (run.code, len(run.out), len(run.err)) == (0, 300_000, 100_000)


async def test_a_check_that_outruns_its_time_is_killed_and_reaped() -> None:
    check = EarlyCheck(["sleep", "60"])
    pid = check.pid
    assert pid is not None
    run = await check.result(0.2)
    assert (run.code, run.err) == (None, "sleep timed out after 0.2 s")
    assert gone(pid)
    assert check.pid is None


async def test_the_local_launcher_takes_an_early_checks_result_instead_of_running_it_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    argv = ["sh", "-c", f'echo run >> "{runs}"; echo checked']
    other = ["sh", "-c", f'echo other >> "{runs}"; echo fresh']
    check = EarlyCheck(argv)
    async with LocalLauncher(guardian=False, early_checks=[check]) as launcher:
        first = await launcher.run_check("node0", argv, timeout=10.0)
        fresh = await launcher.run_check("node0", other, timeout=10.0)
        again = await launcher.run_check("node0", argv, timeout=10.0)  # taken once: this one runs
    assert (first.code, first.out, fresh.out, again.out) == (0, "checked\n", "fresh\n", "checked\n")
    assert runs.read_text().splitlines() == ["run", "other", "run"]


async def test_an_early_check_nobody_asked_for_ends_with_the_launcher() -> None:
    check = EarlyCheck(["sleep", "60"])
    pid = check.pid
    assert pid is not None
    async with LocalLauncher(guardian=False, early_checks=[check]) as launcher:
        assert pid in launcher._own_children()  # never taken for a stray of a unit
        await anyio.sleep(0)
    assert gone(pid)


async def test_a_job_stopped_while_it_waits_for_the_check_kills_the_check() -> None:
    check = EarlyCheck(["sleep", "60"])
    pid = check.pid
    assert pid is not None
    with anyio.move_on_after(0.2):
        await check.result(30.0)
    assert gone(pid)


def test_discard_is_idempotent_and_closes_its_files() -> None:
    check = EarlyCheck(["sleep", "60"])
    before = set(os.listdir("/proc/self/fd"))
    check.discard()
    check.discard()
    assert len(before - set(os.listdir("/proc/self/fd"))) == 2  # the two memory files
