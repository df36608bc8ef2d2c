"""One node of a job with a spare lost mid-benchmark, and what both replacement tests check.

Used by test_replace_node.py (a worker node) and test_replace_infra.py (the infra node).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.slurm.conftest import final_job_event, job_listed, journal, squeue_steps, wait_for
from tests.slurm.node_loss import kill_node, mark_down, restore
from tests.slurm.test_lost_node import job_phase

BENCH_SECONDS = 20  # long enough that the node is lost while the benchmark runs


def recorded_benchmark(runs: Path) -> str:
    """A benchmark command that appends `started` and, BENCH_SECONDS later, `finished` to `runs`."""
    return f"echo started >> {runs}; sleep {BENCH_SECONDS}; echo finished >> {runs}"


def lose_mid_benchmark(node: str, job: str, runs: Path, log_dir: Path, bench_seconds: float) -> float:
    """Kill `node` 3 s into the benchmark, wait for the job to end; the time of the kill."""
    wait_for("the benchmark to run", runs.exists, timeout=120)
    time.sleep(3)
    killed = kill_node(node, job)
    at = time.time()
    assert killed["tasks"], killed

    def replaced() -> bool:
        return any((e.get("detail") or {}).get("node", {}).get("what") == "replaced" for e in journal(log_dir))

    def ended() -> bool:
        return final_job_event(journal(log_dir))["state"] in ("failed", "succeeded", "cancelled")

    # Slurm declaring the node down (SlurmdTimeout, brought forward) while the job runs on: with
    # --no-kill the allocation stays, and no srun of the job waits on that node
    wait_for("the replacement", lambda: replaced() or ended(), timeout=90)
    mark_down(node)
    wait_for(f"job {job} to end", ended, timeout=bench_seconds * 2 + 90)
    return at


def node_events(events: list[dict[str, Any]], checked: list[str]) -> list[dict[str, Any]]:
    """The job's node events after preflight, which must have passed on `checked` (units' nodes and the spare)."""
    facts = [e for e in events if e.get("unit") is None and "node" in (e.get("detail") or {})]
    assert sorted(e["detail"]["node"]["node"] for e in facts if e["detail"]["node"]["what"] == "preflight-passed") == (
        checked
    )
    return [e for e in facts if not e["detail"]["node"]["what"].startswith("preflight-")]


def nothing_on(node: str, record: Path, after: float) -> None:
    """No proc.py unit started on `node` after `after`."""
    for path in record.glob("*.start"):
        info = json.loads(path.read_text())
        assert not (info["node"] == node and info["t"] > after), info


def benchmark_ran_again(events: list[dict[str, Any]], runs: Path) -> None:
    """The first benchmark attempt was cut off, the second ran to its end."""
    assert runs.read_text().splitlines() == ["started", "started", "finished"]
    states = [e["state"] for e in events if e.get("unit") == "benchmark"]
    assert states[-1] == "stopped"
    assert states.count("starting") == 2


def no_step_left(node: str, job: str) -> None:
    """srtd has ended; the step it left on the lost node goes once Slurm declares the node down."""
    wait_for(f"job {job}'s batch script to exit", lambda: job_phase(job) in ("", "COMPLETING"), timeout=60)
    mark_down(node)
    wait_for(f"job {job} to leave squeue", lambda: not job_listed(job), timeout=60)
    restore()
    assert squeue_steps(job) == {}
