"""A silent slurmctld: Slurm's own failure texts are recognised, calls retried, srun run again once.

The texts are what Debian's Slurm 22.05 printed on the dev cluster with slurmctld frozen
(docs/failures.md#slurmctld-away).  The fake `srun`/`scancel` below are real processes
that print those texts, so the launcher's retry is exercised end to end without a cluster.
"""

from __future__ import annotations

import stat
import sys
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from srtd.launch._controller import (
    Controller,
    backoff,
    communication_error,
    srun_never_reached,
)
from srtd.launch._slurm import SlurmLauncher
from srtd.unit import Unit, UnitKind

SRUN_FROZEN = (
    "srun: error: Unable to confirm allocation for job 115: Socket timed out on send/recv operation\n"
    "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 115\n"
)
SCANCEL_FROZEN = "slurm_load_jobs error: Socket timed out on send/recv operation\n"


def test_slurms_communication_errors_are_recognised_and_a_refusal_is_not() -> None:
    assert communication_error(SCANCEL_FROZEN) == SCANCEL_FROZEN.strip()
    assert srun_never_reached(SRUN_FROZEN) == SRUN_FROZEN.splitlines()[0]
    refused = "srun: error: Unable to create step for job 115: Requested node configuration is not available\n"
    assert srun_never_reached(refused) is None
    assert communication_error(refused) is None
    # A lost node makes scancel say this though slurmctld answered (docs/failures.md#a-lost-node).
    assert communication_error("Kill job error on job step id 134.1: Communication connection failure\n") is None
    # A task's own output that happens to mention a timeout is not srun failing to reach Slurm.
    assert srun_never_reached("worker: Socket timed out on send/recv operation\n") is None


def test_backoff_doubles_up_to_its_ceiling() -> None:
    delays = backoff(1.0, 10.0)
    assert [next(delays) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_the_controller_says_once_that_it_is_silent_and_once_that_it_answers() -> None:
    now = [100.0]
    controller = Controller(now=lambda: now[0])
    with capture_logs() as logs:
        controller.silent("squeue: Socket timed out on send/recv operation")
        now[0] = 110.0
        controller.silent("scancel: Socket timed out on send/recv operation")
        now[0] = 131.0
        controller.answered()
        controller.answered()
    events = [entry["event"] for entry in logs]
    assert events == [
        "slurmctld does not answer (squeue: Socket timed out on send/recv operation); srtd keeps "
        "supervising what runs and retries its Slurm calls until it answers",
        "slurmctld answers again (after 31 s)",
    ]


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.anyio
async def test_a_call_is_retried_while_the_controller_is_silent(tmp_path: Path) -> None:
    count = tmp_path / "count"
    scancel = _script(
        tmp_path / "scancel",
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n"
        f'[ "$n" -lt 2 ] && {{ echo "{SCANCEL_FROZEN.strip()}" >&2; exit 0; }}\nexit 0\n',
    )
    controller = Controller()
    with capture_logs() as logs:
        result = await controller.call([str(scancel), "--signal=TERM", "1.0"])
    assert result.code == 0
    assert result.unreached is None
    assert count.read_text().strip() == "3"  # two silent answers, then delivered
    assert [e["event"].split(" (")[0] for e in logs] == ["slurmctld does not answer", "slurmctld answers again"]


@pytest.mark.anyio
async def test_a_call_gives_up_when_it_is_moot(tmp_path: Path) -> None:
    scancel = _script(tmp_path / "scancel", f'echo "{SCANCEL_FROZEN.strip()}" >&2\n')
    result = await Controller().call([str(scancel), "1.0"], done=lambda: True)
    assert result.unreached == SCANCEL_FROZEN.strip()


def _fake_srun(tmp_path: Path, fail_times: int) -> Path:
    """Fails like srun against a frozen slurmctld `fail_times` times, then runs the wrapper."""
    count = tmp_path / "srun-count"
    return _script(
        tmp_path / "srun",
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n"
        f'if [ "$n" -lt {fail_times} ]; then printf %s "{SRUN_FROZEN}"; exit 1; fi\n'
        f'export SLURM_JOB_ID=7 SLURM_STEP_ID=$n\nexec "${{@: -3}}"\n',
    )


def _unit(tmp_path: Path) -> Unit:
    started = tmp_path / "started"
    argv = (sys.executable, "-c", f"open({str(started)!r}, 'a').write('x'); import time; time.sleep(0.5)")
    return Unit(name="w0", kind=UnitKind.WORKER, phase="workers", nodes=("node1",), argv=argv, log="w0.out")


@pytest.mark.anyio
async def test_an_srun_that_never_reached_the_controller_runs_again_and_starts_once(tmp_path: Path) -> None:
    srun = _fake_srun(tmp_path, fail_times=2)
    log_dir = tmp_path / "logs"
    with capture_logs() as logs:
        async with SlurmLauncher(job_id="7", log_dir=log_dir, srun=str(srun)) as launcher:
            handle = await launcher.start(_unit(tmp_path), attempt=0, log_path=log_dir / "w0.out")
            await handle.settle()
            assert handle.step_id == "7.2"
            status = await handle.wait()
    assert status.code == 0
    assert (tmp_path / "srun-count").read_text().strip() == "3"
    assert (tmp_path / "started").read_text() == "x"  # the task ran once
    said = [e["event"] for e in logs if e["event"].startswith("slurmctld")]
    assert [s.split(" (")[0] for s in said] == ["slurmctld does not answer", "slurmctld answers again"]


@pytest.mark.anyio
async def test_a_stop_while_srun_waits_to_run_again_runs_nothing(tmp_path: Path) -> None:
    srun = _fake_srun(tmp_path, fail_times=100)
    log_dir = tmp_path / "logs"
    async with SlurmLauncher(job_id="7", log_dir=log_dir, srun=str(srun)) as launcher:
        handle = await launcher.start(_unit(tmp_path), attempt=0, log_path=log_dir / "w0.out")
        async with anyio.create_task_group() as tg:
            tg.start_soon(handle.settle)
            await anyio.sleep(0.5)  # srun failed once and waits its backoff
            tg.cancel_scope.cancel()  # a teardown cancels the settle first, as the supervisor does
        await handle.signal(15)
        status = await handle.wait()
    assert status.code == 1
    assert (tmp_path / "srun-count").read_text().strip() == "1"
    assert not (tmp_path / "started").exists()


@pytest.mark.anyio
async def test_the_exit_sweep_kills_every_leftover_step_with_one_scancel(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    calls = tmp_path / "scancel-calls"
    squeue = _script(
        tmp_path / "squeue",
        f'case "$*" in *--steps*) cat {steps} 2>/dev/null;; *) echo RUNNING;; esac\n',
    )
    scancel = _script(
        tmp_path / "scancel", f'echo "$*" >> {calls}\n[ "$1" = --signal=KILL ] && rm -f {steps}\nexit 0\n'
    )
    log_dir = tmp_path / "logs"
    async with SlurmLauncher(
        job_id="7", log_dir=log_dir, srun=str(_fake_srun(tmp_path, 0)), squeue=str(squeue), scancel=str(scancel)
    ) as launcher:
        for name in ("w0", "w1"):
            unit = replace(_unit(tmp_path), name=name, log=f"{name}.out")
            handle = await launcher.start(unit, attempt=0, log_path=log_dir / unit.log)
            await handle.settle()
            await handle.wait()
        # Their srun clients are gone, but Slurm still lists both steps (as after a lost client).
        steps.write_text("7.0 w0\n7.1 w1\n")
    assert calls.read_text().splitlines() == ["--signal=KILL 7.0 7.1"]
