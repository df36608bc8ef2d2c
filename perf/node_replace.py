"""A worker node lost under a job with a spare, on the dev Slurm cluster: how fast it serves again.

    scripts/slurm-dev-cluster up 4
    python -m perf node_replace [--quick]

Each run submits the job of `tests/slurm/test_replace_node.py` (a worker on node1 and one on
node2, the spare node3 from `resources.spare_nodes: 1`, an infra service, a static router
handed node2's address, a benchmark; srtd's own `#SBATCH` lines, so `--no-kill`), and
"kills" node2 a few seconds into the benchmark as that test does (its slurmd, the steps'
slurmstepd and tasks, SIGKILLed at once).  From the journal:

- **loss → decision**: from the SIGKILL to the `node` event `lost` (the presence check's
  detection; the same bound as `node_loss`: node_lost_seconds 10 + interval 3 + connect 2);
- **decision → replacement launched**: from `lost` to the moved worker's `starting` on the
  spare (its step exists);
- **loss → served again**: from the SIGKILL to the `node` event `replaced` (every moved and
  restarted unit ready again).

After each run node2 is marked down, the job leaves squeue and `scripts/slurm-dev-cluster
up` restores the cluster.  Without a dev cluster the scenario is skipped.  On a shared
machine run it under the cluster's lock.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from perf._common import summary_ms
from perf.node_loss import DETECTION_BOUND, _cluster_up, _restore, timed_section

MOVED = "agg_1_node2"
BENCH_SECONDS = 25  # longer than the detection (about 12 s): the benchmark is still running when the loss is decided


def _submit(work: Path) -> tuple[str, Path, Path]:
    from tests.slurm.conftest import wait_for
    from tests.slurm.test_replace_node import submit_with_spare

    token = "srtdperf" + uuid.uuid4().hex[:12]
    runs = work / "bench.runs"
    log_dir = work / "logs"
    job = submit_with_spare(work, "perfspare", token, f"echo started >> {runs}; sleep {BENCH_SECONDS}")
    wait_for("the benchmark to run", runs.exists, timeout=120)
    return job, log_dir, runs


def one_run() -> dict[str, float]:
    from perf.node_loss import _ended
    from tests.slurm.node_loss import kill_node

    with tempfile.TemporaryDirectory(prefix="srtd-perf-node-replace-") as tmp:
        job, log_dir, _ = _submit(Path(tmp))
        try:
            time.sleep(2)
            killed_at = time.time()
            kill_node("node2", job)
            events = _ended(log_dir)
        finally:
            _restore(job)
    node = {
        e["detail"]["node"]["what"]: e for e in events if e.get("unit") is None and "node" in (e.get("detail") or {})
    }
    final = events[-1]
    launched = next(e for e in events if e.get("unit") == MOVED and e["state"] == "starting" and e.get("attempt") == 1)
    return {
        "decision_s": float(node["lost"]["ts"] - killed_at),
        "launched_s": float(launched["ts"] - node["lost"]["ts"]),
        "served_s": float(node["replaced"]["ts"] - killed_at),
        "exit_code": float(final.get("exit_code", -1)),
    }


def node_replace(quick: bool) -> dict[str, Any]:
    if not _cluster_up():
        return {"skipped": "no dev Slurm cluster (scripts/slurm-dev-cluster up 4)"}
    runs = [one_run() for _ in range(2 if quick else 3)]
    decision = summary_ms([r["decision_s"] for r in runs])
    return {
        "runs": len(runs),
        "bench_s": BENCH_SECONDS,
        "decision": decision,
        "launched": summary_ms([r["launched_s"] for r in runs]),
        "served": summary_ms([r["served_s"] for r in runs]),
        "exit_codes": [int(r["exit_code"]) for r in runs],
        "met": {
            f"loss → decision ≤ {DETECTION_BOUND} s": decision["max_ms"] <= DETECTION_BOUND * 1000,
            "every job exited 0 after the replacement": all(r["exit_code"] == 0 for r in runs),
        },
    }


def section(r: dict[str, Any]) -> list[str]:
    """This scenario's part of docs/performance.md."""
    rows = [
        ["node2 killed → `node` event `lost` (the decision)", r.get("decision")],
        ["`lost` → the moved worker's step `starting` on the spare", r.get("launched")],
        ["node2 killed → `replaced` (every moved and restarted unit ready again)", r.get("served")],
    ]
    intro = (
        f"`perf/node_replace.py`, {r.get('runs')} runs on the dev cluster: a job with workers on node1 and node2,"
        " the spare node3, a static router holding node2's address and a running benchmark; node2's slurmd,"
        " slurmstepd and tasks SIGKILLed a few seconds into the benchmark (docs/nodes.md#replacing-a-lost-node)."
        " The toy worker is ready at once, so served-again is srtd's own cost plus Slurm's step launch;"
        " a real engine adds its model load."
    )
    return timed_section("## A lost node replaced by a spare on Slurm", r, intro, rows, digits=2)
