"""A node lost under a job on the dev Slurm cluster: loss -> decision, and the teardown against KillWait.

    scripts/slurm-dev-cluster up 4
    python -m perf node_loss [--quick]

Each run submits the lost-node job of `tests/slurm/test_lost_node.py` (a critical worker
on node1 and one on node2, an infra service on node1, no liveness) and "kills" node2 as
that test does: its slurmd, the step's slurmstepd and the task, SIGKILLed at once.

- **decision**: from the SIGKILL to the journal's `failed` of the node2 worker (`node
  node2 lost (...)`), then the job's teardown (`stopping` -> its final event);
- **stop right after the loss**: node2 is killed and `scancel --batch --signal=USR1`
  sent at once, before the presence check could notice; the teardown is measured.

Bounds: decision <= 15 s (node_lost_seconds 10 + interval 3 + connect 2), teardown <=
KillWait + 5 s (15 s on the dev cluster).  After each run the node is marked down (as
SlurmdTimeout would), the job leaves squeue, and `scripts/slurm-dev-cluster up`
restores the cluster.  Without a dev cluster the scenario is skipped.  On a shared
machine run it under the cluster's lock (`flock /tmp/srtd-slurm.lock python -m perf node_loss`).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from perf._common import summary_ms

ROOT = Path(__file__).resolve().parents[1]
KILL_WAIT = 10  # scripts/slurm-dev-cluster
DETECTION_BOUND = 15
LOST = "agg_1_node2"


def _cluster_up() -> bool:
    done = subprocess.run([str(ROOT / "scripts" / "slurm-dev-cluster"), "status"], capture_output=True, check=False)
    return done.returncode == 0


def _submit(work: Path) -> tuple[str, Path]:
    from tests.slurm.conftest import custom_job, journal, plan_job, run_script, sbatch, wait_for

    token = "srtdperf" + uuid.uuid4().hex[:12]
    recipe = work / "lost.yaml"
    recipe.write_text(custom_job("perfloss", token, work / "record"))
    log_dir = work / "logs"
    plan = plan_job(recipe, work, "node[1-2]", log_dir)
    job = sbatch(run_script(plan, 2), work, "--nodelist=node[1-2]", "--no-requeue")

    def running() -> bool:
        return (log_dir / "events.jsonl").exists() and any(e["state"] == "running" for e in journal(log_dir))

    wait_for("the job to run", running, timeout=120)
    return job, log_dir


def _ended(log_dir: Path) -> list[dict[str, Any]]:
    from tests.slurm.conftest import final_job_event, journal, wait_for

    wait_for(
        "the job's final event",
        lambda: final_job_event(journal(log_dir))["state"] in ("failed", "cancelled", "succeeded"),
        timeout=90,
    )
    return journal(log_dir)


def _teardown(events: list[dict[str, Any]]) -> float:
    job_events = [e for e in events if e.get("unit") is None]
    stopping = next(e for e in job_events if e["state"] == "stopping")
    return float(job_events[-1]["ts"] - stopping["ts"])


def _restore(job: str) -> None:
    from tests.slurm.conftest import job_listed, wait_for
    from tests.slurm.node_loss import mark_down, restore

    wait_for("the batch script to exit", lambda: not _phase(job) or _phase(job) == "COMPLETING", timeout=60)
    mark_down("node2")
    wait_for(f"job {job} to leave squeue", lambda: not job_listed(job), timeout=60)
    restore()


def _phase(job: str) -> str:
    done = subprocess.run(["squeue", "-h", f"--jobs={job}", "--format=%T"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def one_run(stop_at_once: bool) -> dict[str, float]:
    from tests.slurm.node_loss import kill_node

    with tempfile.TemporaryDirectory(prefix="srtd-perf-node-loss-") as tmp:
        work = Path(tmp)
        job, log_dir = _submit(work)
        try:
            killed_at = time.time()
            kill_node("node2", job)
            if stop_at_once:
                subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True, timeout=30)
            events = _ended(log_dir)
        finally:
            _restore(job)
    run = {"teardown_s": _teardown(events)}
    if not stop_at_once:
        lost = next(e for e in events if e.get("unit") == LOST and e["state"] == "failed")
        run["decision_s"] = float(lost["ts"] - killed_at)
    return run


def node_loss(quick: bool) -> dict[str, Any]:
    if not _cluster_up():
        return {"skipped": "no dev Slurm cluster (scripts/slurm-dev-cluster up 4)"}
    runs = 2 if quick else 5
    lost = [one_run(stop_at_once=False) for _ in range(runs)]
    stopped = [one_run(stop_at_once=True) for _ in range(runs)]
    decision = summary_ms([r["decision_s"] for r in lost])
    teardown = summary_ms([r["teardown_s"] for r in lost])
    stop_teardown = summary_ms([r["teardown_s"] for r in stopped])
    bound = KILL_WAIT + 5
    return {
        "runs": runs,
        "kill_wait_s": KILL_WAIT,
        "decision": decision,
        "teardown": teardown,
        "stop_teardown": stop_teardown,
        "met": {
            f"decision ≤ {DETECTION_BOUND} s": decision["max_ms"] <= DETECTION_BOUND * 1000,
            f"teardown ≤ KillWait + 5 s ({bound} s)": max(teardown["max_ms"], stop_teardown["max_ms"]) <= bound * 1000,
        },
    }


def section(r: dict[str, Any]) -> list[str]:
    """This scenario's part of docs/performance.md."""
    rows = [
        ["node2 killed → its worker `failed` (the decision)", r.get("decision")],
        ["that job's teardown (`stopping` → final event)", r.get("teardown")],
        ["killed + stop sent at once: teardown", r.get("stop_teardown")],
    ]
    intro = (
        f"`perf/node_loss.py`, {r.get('runs')} runs of each case on the dev cluster"
        f" (KillWait {r.get('kill_wait_s')} s): node2's slurmd, slurmstepd and task SIGKILLed under a running job"
        " with no liveness"
        " (docs/failures.md#a-lost-node)."
    )
    return timed_section("## A lost node on Slurm: decision and teardown", r, intro, rows, digits=1)


def timed_section(title: str, r: dict[str, Any], intro: str, rows: list[list[Any]], digits: int) -> list[str]:
    """A Slurm scenario's part of the page: its load, what it did, p50/max in seconds, the bounds met."""
    if "skipped" in r:
        return [title, "", f"Skipped: {r['skipped']}.", ""]
    load = f"_load average {r['load_before'][0]:.1f} before, {r['load_after'][0]:.1f} after; {r['seconds']:g} s_"
    return [
        title,
        "",
        load,
        "",
        intro,
        "",
        "| measured | p50 | max |",
        "|---|---|---|",
        *(f"| {name} | {v['p50_ms'] / 1000:.{digits}f} s | {v['max_ms'] / 1000:.{digits}f} s |" for name, v in rows),
        "",
        *(f"- {k}: {'yes' if v else '**no**'}" for k, v in r["met"].items()),
        "",
    ]
