"""An srun that Slurm refuses fails its unit with srun's own words, and nothing is left running."""

from __future__ import annotations

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
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")


def recipe(token: str, record: Path, srun_options: str = "{}") -> str:
    odd = f"""\
  - name: odd
    command: {proc_command(token, record)}
    placement: {{node: head}}
    critical: true
    srun_options: {srun_options}
"""
    return custom_job("refused", token, record, services=odd)


def run_refused(
    tmp_path: Path, token: str, text: str, edit: Callable[[dict[str, Any]], None] | None = None
) -> tuple[str, Path]:
    path = tmp_path / "refused.yaml"
    path.write_text(text)
    log_dir = tmp_path / "logs"
    plan = plan_job(path, tmp_path, "node[1-2]", log_dir, edit)
    job = sbatch(run_script(plan, 2), tmp_path, "--nodelist=node[1-2]")
    wait_for(f"job {job} to end", lambda: job_state(job).get("JobState") not in ("RUNNING", "PENDING", "COMPLETING"))
    return job, log_dir


def check_failed_with(job: str, tmp_path: Path, log_dir: Path, unit: str, message: str) -> None:
    assert job_state(job)["ExitCode"] == "1:0"
    end = final_job_event(journal(log_dir))
    assert end["state"] == "failed"
    assert end["reason"].startswith(f"{unit} failed: launch failed: {unit}: srun refused step {unit}")
    assert message in end["reason"]
    console = (tmp_path / "batch.out").read_text()
    assert message in console
    assert message in (log_dir / "postmortem.txt").read_text()


def test_an_unknown_srun_option_fails_the_unit_with_sruns_message(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    record = tmp_path / "record"
    job, log_dir = run_refused(tmp_path, token, recipe(token, record, '{no-such-flag: "1"}'))
    check_failed_with(job, tmp_path, log_dir, "service_odd", "unrecognized option '--no-such-flag=1'")
    assert not (record / "service_odd.0.start").exists()
    nothing_left(job)


def test_a_node_outside_the_allocation_fails_the_unit_with_sruns_message(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    def elsewhere(plan: dict[str, Any]) -> None:
        for unit in plan["units"]:
            if unit["name"] == "service_odd":
                unit["nodes"] = ["node4"]

    record = tmp_path / "record"
    job, log_dir = run_refused(tmp_path, token, recipe(token, record), elsewhere)
    message = f"srun: error: Unable to create step for job {job}: Requested node configuration is not available"
    check_failed_with(job, tmp_path, log_dir, "service_odd", message)
    assert not (record / "service_odd.0.start").exists()
    nothing_left(job)
