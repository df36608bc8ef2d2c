"""Stopping a job on the dev cluster: srtd's tiered teardown, Slurm's scancel, the time limit."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    custom_job,
    final_job_event,
    job_state,
    journal,
    plan_job,
    proc_command,
    run_script,
    sbatch,
    unit_finals,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")

TERMINATE_TIMEOUT = 3.0


def tiers_recipe(token: str, record: Path) -> str:
    """Units in three tiers on two nodes; `stubborn` ignores SIGTERM; the job runs until stopped."""
    services = f"""\
  - name: store
    command: {proc_command(token, record)}
    start: before_workers
    placement: {{node: workers}}
    readiness: {{log: {{pattern: "^ready"}}}}
  - name: stubborn
    command: {proc_command(token, record, "--ignore-term")}
    placement: {{node: head}}
    readiness: {{log: {{pattern: "^ready"}}}}
"""
    return custom_job("tiers", token, record, worker_args=("--term-delay", "0.5"), services=services)


def short_timeouts(plan: dict[str, Any]) -> None:
    for unit in plan["units"]:
        unit["terminate_timeout"] = TERMINATE_TIMEOUT


def start_job(
    tmp_path: Path,
    token: str,
    *,
    edit: Callable[[dict[str, Any]], None] = short_timeouts,
    until: str = "running",
    **script: Any,
) -> tuple[str, Path, Path]:
    """Submit the tiers job (srtd run plan.json as the batch shell); wait until the job reaches `until`."""
    record = tmp_path / "record"
    recipe = tmp_path / "tiers.yaml"
    recipe.write_text(tiers_recipe(token, record))
    log_dir = tmp_path / "logs"
    plan = plan_job(recipe, tmp_path, "node[1-2]", log_dir, edit)
    job = sbatch(run_script(plan, 2, **script), tmp_path, "--nodelist=node[1-2]")

    def running() -> bool:
        try:
            return any(e.get("unit") is None and e["state"] == until for e in journal(log_dir))
        except (OSError, ValueError):
            return False

    wait_for("the job to be running", running, timeout=180)
    return job, log_dir, record


def wait_gone(job: str, timeout: float = 60) -> dict[str, str]:
    wait_for(
        f"job {job} to end",
        lambda: job_state(job).get("JobState") not in ("RUNNING", "COMPLETING", "PENDING"),
        timeout=timeout,
    )
    return job_state(job)


def term_times(record: Path) -> dict[str, float]:
    return {p.name.removesuffix(".0.term"): float(p.read_text()) for p in record.glob("*.0.term")}


def test_scancel_batch_usr1_tears_down_by_tier_and_the_job_is_cancelled_138(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    job, log_dir, record = start_job(tmp_path, token)
    plan_units = {e["unit"] for e in journal(log_dir) if e.get("unit")}
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True)
    state = wait_gone(job)
    assert state["ExitCode"] == "138:0", state
    events = journal(log_dir)
    end = final_job_event(events)
    assert end["state"] == "cancelled"
    assert end["exit_code"] == 138
    assert end["reason"].startswith("received SIGUSR1: a graceful stop request")
    assert end.get("detail") is None  # a plain USR1 is not the time limit
    finals = unit_finals(events)
    assert set(finals) == plan_units
    # Every task got SIGTERM (its trap wrote a marker), tier by tier.
    terms = term_times(record)
    assert set(terms) == plan_units
    tier0 = [t for n, t in terms.items() if n.startswith(("agg_", "service_stubborn"))]
    tier1 = [t for n, t in terms.items() if n.startswith("service_store")]
    tier2 = [terms["service_registry"]]
    assert max(tier0) < min(tier1) < min(tier2)
    # The unit that ignores SIGTERM was killed at its deadline, not before.
    stubborn = finals["service_stubborn"]
    assert stubborn["reason"] == f"killed after {TERMINATE_TIMEOUT:g} s (SIGTERM not obeyed)"
    assert stubborn["signal"] == 9
    assert min(tier1) - terms["service_stubborn"] >= TERMINATE_TIMEOUT - 0.5
    for name, event in finals.items():
        if name != "service_stubborn":
            assert event["state"] == "stopped", event
            assert event["reason"] == "stopped", event
    nothing_left(job)


def test_a_plain_scancel_ends_inside_killwait_and_the_journal_says_what_slurm_stopped_first(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    job, log_dir, _ = start_job(tmp_path, token)
    plan_units = {e["unit"] for e in journal(log_dir) if e.get("unit")}
    began = time.monotonic()
    subprocess.run(["scancel", job], check=False)
    wait_gone(job)
    assert time.monotonic() - began < 10 + 5  # KillWait is 10 s on the dev cluster
    events = journal(log_dir)
    end = final_job_event(events)  # srtd finished its journal before Slurm's SIGKILL
    assert end["state"] == "cancelled"
    assert end["exit_code"] == 143
    assert "Slurm is ending the job" in end["reason"]
    finals = unit_finals(events)
    assert set(finals) == plan_units
    first = {n for n, e in finals.items() if (e.get("detail") or {}).get("ended_before_stop")}
    # Slurm signalled every step at once: the later tiers had ended before srtd reached them.
    assert {"service_registry"} <= first
    assert any(n.startswith("service_store") for n in first)
    for name in first:
        assert finals[name]["reason"].startswith("ended before srtd stopped it"), finals[name]
    nothing_left(job)


def test_the_early_warning_starts_the_teardown_before_the_time_limit(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    def edit(plan: dict[str, Any]) -> None:
        short_timeouts(plan)
        plan["teardown"]["early_warning_seconds"] = 45

    # Slurm may send the warning up to 60 s early: with a one-minute limit, even in srtd's first
    # second, before the job runs.  srtd notes it then (it would otherwise die of it, journal-less)
    # and acts on it once it listens, so the job may never reach `running`: wait for its start.
    job, log_dir, _ = start_job(tmp_path, token, edit=edit, until="starting", time_limit="1", signal="B:USR1@45")
    state = wait_gone(job, timeout=180)
    assert state["JobState"] != "TIMEOUT", state
    assert state["ExitCode"] == "138:0", state
    end = final_job_event(journal(log_dir))
    assert end["state"] == "cancelled"
    assert "before the time limit: Slurm's early warning (--signal=B:USR1@45)" in end["reason"]
    assert end["detail"] == {"time_limit": True}  # what status reporting turns into `timeout`
    nothing_left(job)
