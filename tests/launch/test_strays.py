"""A unit's process that leaves the unit's process group (setsid, setpgid) is still found
after the teardown, reported once, ended and reaped; srtd's other children are left alone."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from srtd.launch import LocalLauncher, Stray
from srtd.launch._strays import children_of, is_subreaper, read_stat
from tests.supervisor.helpers import RUN_PLAN, PlanMaker

pytestmark = pytest.mark.anyio

# The escapee: leaves the unit's session (or only its group), then writes its pid, then sleeps.
ESCAPEE = """\
import os, signal, sys, time
pidfile, how = sys.argv[1], sys.argv[2]
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if how == "setsid":
    os.setsid()
else:
    os.setpgid(0, 0)
if "fork" in sys.argv and (member := os.fork()) == 0:
    time.sleep(600)
    os._exit(0)
with open(pidfile + ".tmp", "w") as f:
    f.write(str(os.getpid()) + (f" {member}" if "fork" in sys.argv else ""))
os.rename(pidfile + ".tmp", pidfile)
time.sleep(600)
"""

# The unit: starts the escapee in the background, waits until it has escaped, exits 0.
UNIT = '{env} "$0" -c "$1" "$2" "$3" "$4" "$5" & while [ ! -s "$2" ]; do sleep 0.05; done'


def escaping_unit(maker: PlanMaker, name: str, how: str, *, clear_env: bool = False, **fields: object) -> object:
    pidfile = maker.root / f"{name}.pid"
    script = UNIT.format(env="env -i" if clear_env else "")
    argv = ("bash", "-c", script, sys.executable, ESCAPEE, str(pidfile), how, maker.token, *fields.pop("args", ()))
    return maker.unit(name, argv=argv, marker=False, **fields)


def pid_in(path: Path) -> int:
    return int(path.read_text().split()[0])


def gone(pid: int) -> bool:
    """Neither running nor a zombie: reaped."""
    return not Path(f"/proc/{pid}").exists()


async def run_unit(launcher: LocalLauncher, unit: object, log: Path) -> None:
    handle = await launcher.start(unit, attempt=0, log_path=log)  # type: ignore[arg-type]
    with anyio.fail_after(20):
        status = await handle.wait()
    assert status.code == 0, log.read_text()


@pytest.mark.parametrize("how", ["setsid", "setpgid"])
async def test_an_escaped_process_is_reported_ended_and_reaped(maker: PlanMaker, how: str) -> None:
    unit = escaping_unit(maker, "bench", how, terminate_timeout=7.0)
    reports: list[Stray] = []
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "bench.log")
        pid = pid_in(maker.root / "bench.pid")
        # its unit has ended, yet it lives on, as srtd's child (srtd is its subreaper)
        assert [c.ppid for c in children_of(os.getpid()) if c.pid == pid] == [os.getpid()]
        with anyio.fail_after(10):
            await launcher.end_strays(reports.append)
        assert gone(pid)
    assert [(s.pid, s.unit, s.grace) for s in reports] == [(pid, "bench", 7.0)]
    assert reports[0].command.startswith(f"{sys.executable} -c ")
    assert reports[0].command.endswith("...") or maker.token in reports[0].command
    assert reports[0].describe() == f"process {pid} ({reports[0].command}) outlived unit bench, which left it behind"


async def test_an_escapee_ignoring_sigterm_is_killed_after_its_units_grace(maker: PlanMaker) -> None:
    unit = escaping_unit(maker, "bench", "setsid", terminate_timeout=0.5, args=("ignore-term",))
    reports: list[Stray] = []
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "bench.log")
        pid = pid_in(maker.root / "bench.pid")
        with anyio.fail_after(10):
            await launcher.end_strays(reports.append)
        assert gone(pid)
    assert [s.pid for s in reports] == [pid]


async def test_an_escapee_without_the_units_environment_is_known_by_its_session(maker: PlanMaker) -> None:
    unit = escaping_unit(maker, "bench", "setpgid", clear_env=True)
    reports: list[Stray] = []
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "bench.log")
        pid = pid_in(maker.root / "bench.pid")
        with anyio.fail_after(40):
            await launcher.end_strays(reports.append)
        assert gone(pid)
    assert [(s.pid, s.unit) for s in reports] == [(pid, "bench")]


async def test_an_escapee_the_job_never_swept_is_ended_when_the_launcher_exits(maker: PlanMaker) -> None:
    unit = escaping_unit(maker, "bench", "setsid", terminate_timeout=5.0)
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "bench.log")
        pid = pid_in(maker.root / "bench.pid")
    assert gone(pid)


async def test_srtds_other_children_are_neither_reported_nor_touched(maker: PlanMaker) -> None:
    """The guardian, a live unit, and a child of the program srtd runs in are not strays."""
    was_subreaper = is_subreaper()
    # in a session of its own, as a setsid() escapee is, and naming a unit this launcher never ran
    env = os.environ | {"SRTD_TEST_TOKEN": maker.token, "SRTD_UNIT": "another-jobs-unit"}
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True, env=env)
    reports: list[Stray] = []
    try:
        async with LocalLauncher(guardian_grace=0.5) as launcher:
            assert is_subreaper()
            live = await launcher.start(maker.unit("live"), attempt=0, log_path=maker.root / "live.log")
            with anyio.fail_after(10):
                await launcher.end_strays(reports.append)
            assert live.poll() is None
            assert launcher.guardian_pid is not None
            assert not gone(launcher.guardian_pid)
            await live.kill()
            await live.wait()
        assert reports == []
        assert bystander.poll() is None
        assert is_subreaper() == was_subreaper
    finally:
        bystander.kill()
        bystander.wait()


async def test_what_a_units_group_left_is_reaped_not_left_as_zombies(maker: PlanMaker) -> None:
    """The unit's group member is SIGKILLed when the unit ends; reparented to srtd, srtd reaps it."""
    script = 'sleep 600 & echo $! > "$0"; exit 0'
    unit = maker.unit("u", argv=("bash", "-c", script, str(maker.root / "member.pid")), marker=False)
    reports: list[Stray] = []
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "u.log")
        member = pid_in(maker.root / "member.pid")
        with anyio.fail_after(10):
            await launcher.end_strays(reports.append)
        assert gone(member)
    assert reports == []


async def test_a_set_hurry_kills_a_stray_without_waiting_for_its_grace(maker: PlanMaker) -> None:
    """A second Ctrl-C sets the event: the stray, deaf to SIGTERM, is SIGKILLed, not waited 60 s for."""
    unit = escaping_unit(maker, "bench", "setsid", terminate_timeout=60.0, args=("ignore-term",))
    reports: list[Stray] = []
    hurry = anyio.Event()
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "bench.log")
        pid = pid_in(maker.root / "bench.pid")
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(launcher.end_strays, reports.append, hurry)
                await anyio.sleep(0.5)
                assert not gone(pid)  # SIGTERM ignored: still within its grace
                hurry.set()
        assert gone(pid)
    assert [s.grace for s in reports] == [60.0]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def test_a_stray_seen_while_the_job_runs_is_ended_by_the_guardian_when_srtd_is_killed(maker: PlanMaker) -> None:
    """srtd SIGKILLed: the stray, seen when its unit ended, is in the guardian's register."""
    escaping_unit(maker, "escaper", "setsid")
    maker.unit("holder")
    plan_file = maker.root / "plan.json"
    plan_file.write_text(maker.plan(hold=True).dumps())
    with open(maker.root / "srtd.out", "wb") as out:
        argv = [sys.executable, str(RUN_PLAN), str(plan_file), "--grace", "0.5"]
        srtd = subprocess.Popen(argv, stdout=out, stderr=out)
    try:
        journal = maker.log_dir / "events.jsonl"
        deadline = time.monotonic() + 30
        while '"unit":"escaper","state":"stopped"' not in (journal.read_text() if journal.exists() else ""):
            assert time.monotonic() < deadline, (maker.root / "srtd.out").read_text()
            time.sleep(0.05)
        escapee = pid_in(maker.root / "escaper.pid")
        assert _alive(escapee)
        os.kill(srtd.pid, signal.SIGKILL)
        srtd.wait()
        deadline = time.monotonic() + 10
        while _alive(escapee):
            assert time.monotonic() < deadline, "the guardian left the stray alive"
            time.sleep(0.05)
    finally:
        if srtd.poll() is None:
            srtd.kill()
            srtd.wait()


def test_children_are_read_from_stat_even_with_a_hostile_command_name(tmp_path: Path) -> None:
    """comm may hold spaces and parentheses; the cheap and the thorough listing agree."""
    program = tmp_path / "x) Z 1 (y"
    shutil.copy("/bin/sleep", program)
    child = subprocess.Popen([str(program), "30"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while (stat := read_stat(child.pid)) is None or stat.comm != program.name:
            assert time.monotonic() < deadline, stat
            time.sleep(0.02)
        assert (stat.ppid, stat.pgrp, stat.session, stat.zombie) == (os.getpid(), child.pid, child.pid, False)
        thorough = {c.pid for c in children_of(os.getpid(), thorough=True)}
        assert child.pid in thorough
        assert thorough == {c.pid for c in children_of(os.getpid(), thorough=False)}
    finally:
        child.kill()
        child.wait()


async def test_a_stray_leading_a_group_is_reported_once_and_its_group_ends_with_it(maker: PlanMaker) -> None:
    """A daemon and its worker in the daemon's own group: one report, both gone."""
    unit = escaping_unit(maker, "bench", "setsid", terminate_timeout=5.0, args=("fork",))
    reports: list[Stray] = []
    async with LocalLauncher(guardian_grace=0.5) as launcher:
        await run_unit(launcher, unit, maker.root / "bench.log")
        daemon, member = map(int, (maker.root / "bench.pid").read_text().split())
        with anyio.fail_after(20):
            await launcher.end_strays(reports.append)
        assert gone(daemon)
        assert gone(member)
    assert [s.pid for s in reports] == [daemon]


def test_a_unit_restarted_many_times_is_remembered_for_its_latest_attempts_only() -> None:
    from srtd.launch._strays import REMEMBERED_ATTEMPTS, Strays

    strays = Strays()
    attempts = 1000
    for pid in range(10_000, 10_000 + attempts):
        strays.started("crashy", pid, 1.0)
        strays.group_ended(pid)
    strays.started("other", 50_000, 1.0)
    latest = set(range(10_000 + attempts - REMEMBERED_ATTEMPTS, 10_000 + attempts))
    assert set(strays.origins) == latest | {50_000}
    assert strays.ended_groups == latest
    # a pid a later attempt uses again stays remembered when its older use is forgotten
    strays.started("other", 10_999, 1.0)
    for pid in range(60_000, 60_000 + REMEMBERED_ATTEMPTS):
        strays.started("crashy", pid, 1.0)
    assert strays.origins[10_999] == "other"
