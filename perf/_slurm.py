"""Slurm at scale on the dev cluster: launch, exit -> decision, teardown, srtd's and srun's cost.

Each scenario submits batch jobs (`sbatch --wait`, 4 nodes) whose shell is
`python -m perf._slurm_job MODE`: inside the allocation it runs the same N steps
twice, once from a plain loop of the srun lines (the floor) and once under
`srtd run plan.json`, and writes the numbers.  One job per size, so a size can be
rerun alone (`PERF_SLURM_SIZES=400 python -m perf slurm-launch`); the sizes
not rerun keep their earlier numbers in the result file, each with its own date.

The dev cluster is shared: run these under `flock /tmp/srtd-slurm.lock`.  Without
a cluster (`sinfo` does not answer) they are left out of `nox -s bench`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from perf._common import REPO, RESULTS

NODES = 4
LAUNCH_SIZES = (50, 200, 400)
EXIT_SIZES = (200, 400)
TEARDOWN_SIZES = (50, 200, 400)
COST_WINDOW = 20.0
_JOB_LIMIT = 420  # seconds: one job stays well inside the cluster lock's ~8 minutes


def cluster_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and any(state in done.stdout for state in ("idle", "mix", "alloc"))


def sizes(default: tuple[int, ...], quick: bool) -> tuple[int, ...]:
    chosen = os.environ.get("PERF_SLURM_SIZES")
    if chosen:
        return tuple(int(s) for s in chosen.split(","))
    return default[:1] if quick else default


def inside(mode: str, n: int, *extra: str) -> dict[str, Any]:
    """One batch job running `perf._slurm_job MODE --n N`: its result."""
    tmp = tempfile.mkdtemp(prefix=f"srtd-slurm-{mode}-{n}-")  # kept when the job fails
    script = (
        "#!/bin/bash\n"
        f"export PYTHONPATH={REPO}\n"
        f"exec {sys.executable} -m perf._slurm_job {mode} --n {n} --workdir {tmp} {' '.join(extra)}\n"
    )
    print(f"[bench]   sbatch {mode} n={n} ...", file=sys.stderr, flush=True)
    began = time.monotonic()
    done = subprocess.run(
        ["sbatch", "--parsable", f"--nodes={NODES}", "--time=9", "--job-name=srtd-perf",
         f"--output={tmp}/batch.out", f"--chdir={REPO}"],
        input=script, text=True, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode == 0:
        _wait_job(done.stdout.strip().split(";")[0])
    result = Path(tmp, "result.json")
    if done.returncode != 0 or not result.exists():
        out = Path(tmp, "batch.out")
        tail = out.read_text()[-3000:] if out.exists() else done.stderr
        raise RuntimeError(f"the {mode} job (n={n}) failed ({done.returncode}): {tail}")
    data: dict[str, Any] = json.loads(result.read_text())
    data["job_s"] = round(time.monotonic() - began, 1)
    data["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    shutil.rmtree(tmp, ignore_errors=True)
    return data


def _wait_job(job: str) -> None:
    """Until squeue no longer lists the job (once a second: `sbatch --wait` backs off to 32 s)."""
    deadline = time.monotonic() + _JOB_LIMIT + 120
    pending_limit = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = subprocess.run(
            ["squeue", "--noheader", f"--jobs={job}", "--format=%T"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if not listed or listed == "COMPLETED":
            return
        if listed == "PENDING" and time.monotonic() > pending_limit:
            break  # the nodes are down or busy: say so rather than wait out the lock
        time.sleep(1.0)
    subprocess.run(["scancel", job], check=False)
    raise RuntimeError(f"job {job} did not start within 60 s or did not end in time: cancelled")


def _merge(name: str, fresh: dict[str, Any]) -> dict[str, Any]:
    """Earlier results of sizes not rerun now, then the fresh ones."""
    path = RESULTS / f"{name}.json"
    kept: dict[str, Any] = {}
    if path.exists():
        kept = dict(json.loads(path.read_text()).get("sizes", {}))
    kept.update(fresh)
    return dict(sorted(kept.items(), key=lambda kv: int(kv[0])))


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b > 0 else float("nan")


def slurm_launch(quick: bool) -> dict[str, Any]:
    """Job start -> every step's task running, srtd against the parallel and serial floors;
    srtd's and its srun clients' CPU and memory at the largest size."""
    chosen = sizes(LAUNCH_SIZES, quick)
    fresh: dict[str, Any] = {}
    for n in chosen:
        window = COST_WINDOW if n == max(LAUNCH_SIZES) else 0.0
        r = inside("launch", n, f"--window={window}")
        r["ratio_parallel"] = _ratio(r["srtd"]["launch_s"], r["floor_parallel"]["launch_s"])
        r["ratio_serial"] = _ratio(r["srtd"]["launch_s"], r["floor_serial"]["launch_s"])
        r["ratio_parallel_from_journal"] = _ratio(r["srtd"]["launch_from_journal_s"], r["floor_parallel"]["launch_s"])
        fresh[str(n)] = r
    merged = _merge("slurm-launch", fresh)
    return {
        "title": "Slurm: launch",
        "target_ratio": 1.1,
        "sizes": merged,
        "met": all(r["ratio_parallel"] <= 1.1 and r["srtd"]["order_kept"] for r in merged.values()),
    }


def slurm_exits(quick: bool) -> dict[str, Any]:
    """A step's task exits -> srtd's `exited` event, against the plain srun client returning."""
    fresh = {str(n): inside("exits", n) for n in sizes(EXIT_SIZES, quick)}
    merged = _merge("slurm-exits", fresh)
    for r in merged.values():
        floor, ours = r["floor"]["p99_ms"], r["srtd"]["p99_ms"]
        r["met"] = ours <= 100 or ours <= 1.2 * floor
    return {"title": "Slurm: exit -> decision", "target_p99_ms": 100, "sizes": merged,
            "met": all(r["met"] for r in merged.values())}  # fmt: skip


def slurm_teardown(quick: bool) -> dict[str, Any]:
    """Stop request -> last step gone from squeue, N steps over 3 tiers."""
    fresh: dict[str, Any] = {}
    for n in sizes(TEARDOWN_SIZES, quick):
        r = inside("teardown", n)
        r["overhead_s"] = round(r["srtd"]["teardown_s"] - r["sum_of_tier_maxima_s"], 3)
        r["floor_overhead_s"] = round(r["floor"]["teardown_s"] - r["sum_of_tier_maxima_s"], 3)
        fresh[str(n)] = r
    merged = _merge("slurm-teardown", fresh)
    big = merged.get(str(max(TEARDOWN_SIZES)))
    return {"title": "Slurm: teardown", "target_overhead_s": 1.0, "sizes": merged,
            "met": big is not None and big["overhead_s"] <= 1.0}  # fmt: skip


def slurm_srun(quick: bool) -> dict[str, Any]:
    """What one srun client costs, by the shape of its line (srtd's, a minimal one, --threads=1)."""
    n = 20 if quick else 100
    r = inside("options", n, f"--window={10.0 if quick else COST_WINDOW}")
    return {"title": "Slurm: the srun clients", **r}


SCENARIOS = {
    "slurm-launch": slurm_launch,
    "slurm-exits": slurm_exits,
    "slurm-teardown": slurm_teardown,
    "slurm-srun": slurm_srun,
}
