from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from srtd.errors import LaunchError
from srtd.launch import ExitStatus, LocalLauncher, unit_argv
from srtd.unit import Container
from tests.supervisor.helpers import PlanMaker, leftover_processes

pytestmark = pytest.mark.anyio

PRINT_ARGV = (
    "import sys, json, os; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}))"
)


def test_exit_status_describes_itself() -> None:
    assert ExitStatus(code=0).failed is False
    assert ExitStatus(code=3).failed is True
    assert ExitStatus(signal=9).failed is True
    assert ExitStatus(code=3).describe() == "exit code 3"
    assert ExitStatus(signal=signal.SIGKILL).describe() == "killed by SIGKILL"
    assert ExitStatus(signal=signal.SIGTERM).shell_code == 143
    assert ExitStatus(code=7).shell_code == 7
    assert ExitStatus.from_returncode(-15) == ExitStatus(signal=15)
    assert ExitStatus.from_returncode(2) == ExitStatus(code=2)


def test_preamble_passes_argv_as_positional_parameters(maker: PlanMaker) -> None:
    unit = maker.unit("u", argv=("prog", "a b", "$HOME"), preamble="export X=1", marker=False)
    assert unit_argv(unit) == ["bash", "-c", 'export X=1\nexec "$@"', "srtd-unit", "prog", "a b", "$HOME"]


async def _run_to_end(launcher: LocalLauncher, unit_: object, log: Path, attempt: int = 0) -> ExitStatus:
    handle = await launcher.start(unit_, attempt=attempt, log_path=log)  # type: ignore[arg-type]
    with anyio.fail_after(10):
        return await handle.wait()


async def test_argv_is_never_shell_interpreted_and_env_is_layered(maker: PlanMaker, tmp_path: Path) -> None:
    os.environ["SRTD_TEST_INHERITED"] = "yes"
    os.environ["SRTD_TEST_UNSET"] = "gone"
    try:
        unit = maker.unit(
            "u",
            argv=(sys.executable, "-c", PRINT_ARGV, "$HOME", "a b", "; echo injected", "`id`"),
            env={"EXTRA": "1"},
            unset_env=("SRTD_TEST_UNSET",),
            cwd=str(tmp_path),
            marker=False,
        )
        log = tmp_path / "logs" / "u.log"
        async with LocalLauncher() as launcher:
            status = await _run_to_end(launcher, unit, log, attempt=2)
    finally:
        del os.environ["SRTD_TEST_INHERITED"], os.environ["SRTD_TEST_UNSET"]
    assert status == ExitStatus(code=0)
    out = json.loads(log.read_text())
    assert out["argv"] == ["$HOME", "a b", "; echo injected", "`id`"]
    assert out["env"]["EXTRA"] == "1"
    assert out["env"]["SRTD_TEST_INHERITED"] == "yes"
    assert "SRTD_TEST_UNSET" not in out["env"]
    assert out["env"]["SRTD_UNIT"] == "u"
    assert out["env"]["SRTD_ATTEMPT"] == "2"
    assert out["cwd"] == str(tmp_path)


async def test_preamble_runs_then_execs_the_program(maker: PlanMaker, tmp_path: Path) -> None:
    unit = maker.unit(
        "u",
        argv=(sys.executable, "-c", PRINT_ARGV, "x y", "$X"),
        preamble='export FROM_PREAMBLE="$(echo hello)"\necho preamble-ran',
        marker=False,
    )
    log = tmp_path / "u.log"
    async with LocalLauncher() as launcher:
        status = await _run_to_end(launcher, unit, log)
    assert status.code == 0
    first, second = log.read_text().splitlines()
    assert first == "preamble-ran"
    out = json.loads(second)
    assert out["argv"] == ["x y", "$X"]
    assert out["env"]["FROM_PREAMBLE"] == "hello"


async def test_the_program_replaces_the_shell_and_gets_sigterm(maker: PlanMaker, tmp_path: Path) -> None:
    unit = maker.unit("u", preamble="true", argv=None)
    async with LocalLauncher() as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")
        with anyio.fail_after(5):
            while not maker.marks("u"):
                await anyio.sleep(0.02)
        cmdline = Path(f"/proc/{handle.pid}/cmdline").read_bytes()
        assert b"unitprog.py" in cmdline  # same pid: bash exec'd the program
        await handle.signal(signal.SIGTERM)
        with anyio.fail_after(5):
            status = await handle.wait()
    assert status == ExitStatus(signal=signal.SIGTERM)
    assert [m["event"] for m in maker.marks("u")] == ["start", "signal", "exit"]


async def test_stdout_and_stderr_go_to_a_fresh_log(maker: PlanMaker, tmp_path: Path) -> None:
    log = tmp_path / "u.log"
    log.write_text("stale content from before\n")
    code = "import sys; print('out'); sys.stdout.flush(); print('err', file=sys.stderr); sys.exit(4)"
    unit = maker.unit("u", argv=(sys.executable, "-c", code), marker=False)
    async with LocalLauncher() as launcher:
        status = await _run_to_end(launcher, unit, log)
    assert status == ExitStatus(code=4)
    assert log.read_text().splitlines() == ["out", "err"]


async def test_signal_reaches_the_whole_group_and_leftovers_die_with_the_leader(
    maker: PlanMaker, tmp_path: Path
) -> None:
    unit = maker.unit("u", "--spawn-child")
    async with LocalLauncher() as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")
        with anyio.fail_after(5):
            while len(leftover_processes(maker.token)) < 2:
                await anyio.sleep(0.02)
        await handle.signal(signal.SIGTERM)
        with anyio.fail_after(5):
            await handle.wait()
    # conftest's fixture asserts nothing with the token is left

    unit2 = maker.unit("v", "--spawn-child", "--exit", "0:0.3")
    async with LocalLauncher() as launcher:
        status = await _run_to_end(launcher, unit2, tmp_path / "v.log")
    assert status.code == 0
    assert leftover_processes(maker.token) == []  # the grandchild died with its leader


async def test_many_waiters_and_kill(maker: PlanMaker, tmp_path: Path) -> None:
    unit = maker.unit("u", "--ignore-term")
    results: list[ExitStatus] = []
    async with LocalLauncher() as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")

        async def waiter() -> None:
            results.append(await handle.wait())

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(waiter)
            with anyio.fail_after(5):
                while not maker.marks("u"):
                    await anyio.sleep(0.02)
            await handle.signal(signal.SIGTERM)
            await anyio.sleep(0.2)
            assert results == []  # it ignores SIGTERM
            t0 = time.monotonic()
            await handle.kill()
        assert time.monotonic() - t0 < 1.0
        await handle.kill()  # a no-op once it has ended
        await handle.signal(signal.SIGTERM)
    assert results == [ExitStatus(signal=signal.SIGKILL)] * 3


async def test_missing_program_is_a_launch_error(maker: PlanMaker, tmp_path: Path) -> None:
    unit = maker.unit("u", argv=("/nonexistent/program", "x"), marker=False)
    async with LocalLauncher() as launcher:
        with pytest.raises(LaunchError, match="no such executable"):
            await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")


async def test_a_port_another_program_listens_on_refuses_the_first_attempt(maker: PlanMaker, tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        unit = maker.unit("u", argv=(sys.executable, "-c", "pass"), marker=False, ports={"http": port})
        async with LocalLauncher() as launcher:
            with pytest.raises(LaunchError) as info:
                await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")
            said = str(info.value)
            assert said.startswith(f"u: port {port} (http) is already in use on this machine; pid {os.getpid()} (")
            assert said.endswith(") listens there and would answer the unit's readiness probe")
            assert not (tmp_path / "u.log").exists()  # nothing was started
            # a restart is not refused: its own previous attempt may still hold the port
            handle = await launcher.start(unit, attempt=1, log_path=tmp_path / "u.log")
            assert await handle.wait() == ExitStatus(code=0)
    # free again: the first attempt starts
    async with LocalLauncher() as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")
        assert await handle.wait() == ExitStatus(code=0)


async def test_container_specs_warn_once_per_job(maker: PlanMaker, tmp_path: Path) -> None:
    code = "pass"
    a = maker.unit("a", argv=(sys.executable, "-c", code), container=Container(image="img"), marker=False)
    b = maker.unit("b", argv=(sys.executable, "-c", code), container=Container(image="img"), marker=False)
    with capture_logs() as logs:
        async with LocalLauncher() as launcher:
            await _run_to_end(launcher, a, tmp_path / "a.log")
            await _run_to_end(launcher, b, tmp_path / "b.log")
    warnings = [entry for entry in logs if "container" in entry["event"]]
    assert len(warnings) == 1
    assert warnings[0]["log_level"] == "warning"


async def test_leaving_the_launcher_kills_what_is_still_running(maker: PlanMaker, tmp_path: Path) -> None:
    unit = maker.unit("u", "--ignore-term")
    async with LocalLauncher() as launcher:
        guardian = launcher.guardian_pid
        await launcher.start(unit, attempt=0, log_path=tmp_path / "u.log")
        with anyio.fail_after(5):
            while not maker.marks("u"):
                await anyio.sleep(0.02)
    assert leftover_processes(maker.token) == []
    assert guardian is not None
    assert not Path(f"/proc/{guardian}").exists() or b"Z" in Path(f"/proc/{guardian}/stat").read_bytes()
