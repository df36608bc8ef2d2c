"""A node check started before the supervisor loads (srtd/launch/_early.py): it reports what
`slurm_tool` reports for the same argv, the local launcher takes it instead of running the
check again, and one nobody asked for (or that outran its time) is killed and reaped."""

from __future__ import annotations

import errno
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


def test_a_check_whose_memory_files_cannot_be_made_leaves_nothing_open(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []

    def second_refused(name: str, flags: int = os.MFD_CLOEXEC) -> int:
        if made:
            raise OSError(errno.EMFILE, "Too many open files")
        made.append(real(name, flags))
        return made[-1]

    real = os.memfd_create
    monkeypatch.setattr("srtd.launch._early.os.memfd_create", second_refused)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="Too many open files"):
        EarlyCheck(["sleep", "60"])
    assert set(os.listdir("/proc/self/fd")) == before
    assert not child_running("sleep 60")  # nothing was started either


def test_a_check_that_cannot_start_early_is_left_to_the_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """srtd run starts what it can: a node whose early check cannot be set up is checked by
    the preflight itself (`LocalLauncher.run_check` runs an argv it was not given)."""
    from srtd.cli._supervise import early_checks
    from srtd.supervisor import Preflight, node_checks
    from tests.supervisor.helpers import PlanMaker

    maker = PlanMaker(root=Path("/tmp/srtd-early-unused"), token="srtdtest-early")
    maker.unit("svc", argv=("sleep", "1"), marker=False)
    plan = maker.plan()
    started = early_checks(plan, Preflight())
    assert [c.argv for c in started] == [tuple(argv) for argv in node_checks(plan, Preflight())]
    assert len(started) == 1  # the one node
    for check in started:
        check.discard()

    def refused(name: str, flags: int = 0) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr("srtd.launch._early.os.memfd_create", refused)
    assert early_checks(plan, Preflight()) == []


def child_running(command: str) -> bool:
    """A child of this process running `command`."""
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if stat[1] == me and cmdline == command:
            return True
    return False
