"""slurmctld frozen (SIGSTOP) for 30 s under a job: while it runs, during start-up, during teardown.

srtd must keep supervising what runs, retry its Slurm calls until the controller answers,
say once that it does not answer and once that it does again, never launch a unit twice,
and end the job as it would have ended: every unit stopped, 0 steps and 0 processes left,
the journal complete (docs/failures.md#slurmctld-away).  The controller is thawed in a
finally-block whatever happens: the dev cluster is shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.command import supervisor_handover
from tests.slurm.conftest import (
    custom_job,
    final_job_event,
    journal,
    plan_job,
    run_script,
    sbatch,
    squeue_steps,
    unit_finals,
    wait_for,
)
from tests.slurm.node_loss import restore

pytestmark = pytest.mark.usefixtures("slurm")

AWAY = 30.0  # seconds slurmctld does not answer
STATE_DIR = Path(os.environ.get("SRTD_SLURM_DEV_STATE", "/var/lib/srtd-slurm-dev"))
UNITS = ("agg_0_node1", "agg_1_node2", "service_registry")
SILENT = "slurmctld does not answer ("
BACK = "slurmctld answers again (after "


def slurmctld_pid() -> int:
    """The slurmctld `scripts/slurm-dev-cluster up` started (its pid file of record)."""
    pids = [line.split() for line in (STATE_DIR / "pids").read_text().splitlines()]
    return int([pid for name, pid in pids if name == "slurmctld"][-1])


@contextlib.contextmanager
def controller_frozen(seconds: float = AWAY) -> Iterator[None]:
    """slurmctld stopped (SIGSTOP) from entry until `seconds` after it, and thawed whatever happens."""
    pid = slurmctld_pid()
    until = time.monotonic() + seconds
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
        time.sleep(max(until - time.monotonic(), 0.0))
    finally:
        os.kill(pid, signal.SIGCONT)


def srtd_pid(plan: Path) -> int:
    """The `srtd run <plan>` process of the job (the batch shell, on this machine): by now the
    supervisor it execs, `python -m srtd.cli._supervise HANDOVER` (the same pid)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            handover = supervisor_handover(int(entry.name))
            if handover is not None and handover.get("plan") == str(plan):
                return int(entry.name)
    raise AssertionError(f"no srtd process runs {plan}")


@pytest.fixture
def controller_restored() -> Iterator[None]:
    """After the test slurmctld runs and every node is usable again (a node Slurm drained is resumed)."""
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.kill(slurmctld_pid(), signal.SIGCONT)
        restore()


def long_terminate(plan: dict[str, Any]) -> None:
    """SIGTERM, not SIGKILL, must stop the units even when it is delivered only after the outage."""
    for unit in plan["units"]:
        unit["terminate_timeout"] = 90.0


def _submit(
    tmp_path: Path,
    token: str,
    edit: Callable[[dict[str, Any]], None] = long_terminate,
    registry_args: tuple[str, ...] = (),
) -> tuple[str, Path]:
    record = tmp_path / "record"
    recipe = tmp_path / "away.yaml"
    recipe.write_text(custom_job("away", token, record, registry_args=registry_args))
    log_dir = tmp_path / "logs"
    plan = plan_job(recipe, tmp_path, "node[1-2]", log_dir, edit)
    job = sbatch(run_script(plan, 2), tmp_path, "--nodelist=node[1-2]", "--no-requeue")
    return job, log_dir


def _has(log_dir: Path, check: Callable[[dict[str, Any]], bool]) -> bool:
    path = log_dir / "events.jsonl"
    return path.exists() and any(check(e) for e in journal(log_dir))


def _job_running(log_dir: Path) -> bool:
    return _has(log_dir, lambda e: e.get("unit") is None and e["state"] == "running")


def _stop_and_end(job: str, log_dir: Path, *, stop: bool = True) -> dict[str, Any]:
    if stop:
        subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True, timeout=60)

    def ended() -> bool:
        return final_job_event(journal(log_dir))["state"] in ("failed", "succeeded", "cancelled")

    wait_for(f"job {job} to end", ended, timeout=180)
    return final_job_event(journal(log_dir))


def _check_clean_end(job: str, tmp_path: Path, log_dir: Path, nothing_left: Callable[[str], None]) -> str:
    """The job ended as a USR1 stop ends it; the journal is whole; nothing is left; said once each way."""
    events = journal(log_dir)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    end = final_job_event(events)
    assert (end["state"], end["exit_code"]) == ("cancelled", 138), end
    finals = unit_finals(events)
    assert {u: finals[u]["state"] for u in UNITS} == dict.fromkeys(UNITS, "stopped"), finals
    assert {u: finals[u]["reason"] for u in UNITS} == dict.fromkeys(UNITS, "stopped"), finals
    nothing_left(job)
    assert squeue_steps(job) == {}
    out = (tmp_path / "batch.out").read_text()
    assert "Traceback" not in out
    return out


def _said_once_each_way(out: str) -> None:
    assert out.count(SILENT) == 1, out
    assert out.count(BACK) == 1, out


def _starts(events: list[dict[str, Any]], unit: str) -> list[int]:
    return [e["attempt"] for e in events if e.get("unit") == unit and e["state"] == "starting"]


def test_a_running_job_is_supervised_through_the_outage_and_a_crash_in_it_restarts_once(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None], controller_restored: None
) -> None:
    def restartable(plan: dict[str, Any]) -> None:
        long_terminate(plan)
        for unit in plan["units"]:
            if unit["name"] == "agg_0_node1":
                unit["restart"].update(policy="on-failure", backoff_seconds=0.5)

    job, log_dir = _submit(tmp_path, token, restartable)
    wait_for("the job to run", lambda: _job_running(log_dir), timeout=120)
    first = json.loads((tmp_path / "record" / "agg_0_node1.0.start").read_text())
    with controller_frozen():
        os.kill(first["pid"], signal.SIGKILL)  # a crash while slurmctld does not answer
        wait_for("the crash to be seen", lambda: _has(log_dir, lambda e: e["state"] == "backoff"), timeout=10)
    again = tmp_path / "record" / "agg_0_node1.1.start"
    wait_for("the restart once slurmctld answers", again.exists, timeout=60)
    wait_for(
        "the restart to be ready",
        lambda: _has(log_dir, lambda e: e.get("unit") == "agg_0_node1" and e["state"] == "ready" and e["attempt"] == 1),
        timeout=30,
    )
    _stop_and_end(job, log_dir)
    out = _check_clean_end(job, tmp_path, log_dir, nothing_left)
    _said_once_each_way(out)
    events = journal(log_dir)
    assert _starts(events, "agg_0_node1") == [0, 1]  # one restart, never two
    assert not (tmp_path / "record" / "agg_0_node1.2.start").exists()
    crash = next(e for e in events if e.get("unit") == "agg_0_node1" and e["state"] == "exited")
    assert crash["reason"] == "was killed by SIGKILL", crash
    assert json.loads(again.read_text())["t"] >= first["t"] + AWAY - 5  # it waited for the controller


def test_units_waiting_at_start_up_start_once_when_slurmctld_answers(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None], controller_restored: None
) -> None:
    # The workers wait for the registry, ready 5 s after it starts: they are still waiting
    # when the controller freezes (srtd's journal file trails its launches by a write).
    job, log_dir = _submit(tmp_path, token, registry_args=("--ready-after", "5"))
    wait_for("srtd to begin", lambda: _has(log_dir, lambda e: e["state"] == "starting"), timeout=120)
    with controller_frozen():
        pass
    wait_for("the job to run", lambda: _job_running(log_dir), timeout=90)
    _stop_and_end(job, log_dir)
    out = _check_clean_end(job, tmp_path, log_dir, nothing_left)
    _said_once_each_way(out)
    events = journal(log_dir)
    assert {u: _starts(events, u) for u in UNITS} == {u: [0] for u in UNITS}
    assert sorted(p.name for p in (tmp_path / "record").glob("*.start")) == sorted(f"{u}.0.start" for u in UNITS)


def test_a_teardown_during_the_outage_stops_every_unit_once_slurmctld_answers(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None], controller_restored: None
) -> None:
    job, log_dir = _submit(tmp_path, token)
    wait_for("the job to run", lambda: _job_running(log_dir), timeout=120)
    with controller_frozen():
        # What `scancel --batch --signal=USR1` does, without the controller: to srtd itself.
        os.kill(srtd_pid(tmp_path / "plan.json"), signal.SIGUSR1)
        wait_for("the stop", lambda: _has(log_dir, lambda e: e["state"] == "stopping"), timeout=10)
    end = _stop_and_end(job, log_dir, stop=False)
    out = _check_clean_end(job, tmp_path, log_dir, nothing_left)
    _said_once_each_way(out)
    assert end["reason"].startswith("received SIGUSR1"), end
    record = tmp_path / "record"
    assert sorted(p.name for p in record.glob("*.term")) == sorted(f"{u}.0.term" for u in UNITS)
    assert all(json.loads((record / f"{u}.0.start").read_text()) for u in UNITS)
