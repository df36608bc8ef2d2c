"""Exit of a step's task -> srtd seeing it, on the dev Slurm cluster.  Target: p99 <= 250 ms.

    scripts/slurm-dev-cluster up 4
    python perf/slurm_exit_latency.py [--samples 200] [--parallel 4]

Submits one batch job (`sbatch --wait`) that runs this file again with `--inside`.
Inside the allocation it launches `--samples` one-task steps through `SlurmLauncher`,
`--parallel` at a time, spread over the job's nodes.  Each task writes `time.time()`
to a file as the very last thing before it exits; the latency of a sample is the
moment `Handle.wait()` returns in srtd (the moment the supervisor takes its
decision: `_after` runs on that same wake-up) minus that timestamp.  Every node is
this machine, so both clocks are the same clock.  Prints min / p50 / p90 / p99 / max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASK = (
    "import os, sys, time\n"
    "time.sleep(float(sys.argv[2]))\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(repr(time.time()))\n"
    "os._exit(0)\n"
)


async def measure(samples: int, parallel: int, workdir: Path) -> list[float]:
    import anyio

    from srtd.launch import SlurmLauncher
    from srtd.topology import slurm_nodes
    from srtd.unit import Unit, UnitKind

    nodes = slurm_nodes() or ["node1"]
    job = os.environ["SLURM_JOB_ID"]
    latencies: list[float] = []
    limit = anyio.Semaphore(parallel)

    async def one(i: int, launcher: SlurmLauncher) -> None:
        async with limit:
            stamp = workdir / f"exit-{i}"
            unit = Unit(
                name=f"sample_{i}",
                kind=UnitKind.SERVICE,
                phase="bench",
                nodes=(nodes[i % len(nodes)],),
                argv=(sys.executable, "-c", TASK, str(stamp), "0.3"),
                log=f"sample_{i}.out",
            )
            handle = await launcher.start(unit, attempt=0, log_path=workdir / unit.log)
            await handle.settle()
            status = await handle.wait()
            seen = time.time()
            if status.failed:
                raise SystemExit(f"sample {i} failed: {status.describe()}")
            latencies.append(seen - float(stamp.read_text()))

    async with SlurmLauncher(job_id=job, log_dir=workdir) as launcher, anyio.create_task_group() as tg:
        for i in range(samples):
            tg.start_soon(one, i, launcher)
    return latencies


def inside(args: argparse.Namespace) -> None:
    import anyio

    sys.path.insert(0, str(REPO))
    workdir = Path(args.workdir)
    latencies = anyio.run(measure, args.samples, args.parallel, workdir)
    (workdir / "latencies.json").write_text(json.dumps(latencies))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inside:
        inside(args)
        return 0
    with tempfile.TemporaryDirectory(prefix="srtd-exit-latency-") as tmp:
        script = (
            "#!/bin/bash\n"
            f"exec {sys.executable} {Path(__file__).resolve()} --inside --samples {args.samples} "
            f"--parallel {args.parallel} --workdir {tmp}\n"
        )
        done = subprocess.run(
            ["sbatch", "--wait", f"--nodes={args.nodes}", "--time=30", f"--output={tmp}/batch.out"],
            input=script,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(Path(tmp, "batch.out").read_text(), file=sys.stderr)
            return 1
        ms = [v * 1000 for v in json.loads(Path(tmp, "latencies.json").read_text())]
    print(
        f"task exit -> srtd sees it, {len(ms)} steps ({args.parallel} at a time, {args.nodes} nodes): "
        f"min {min(ms):.0f} ms, p50 {statistics.median(ms):.0f} ms, p90 {pct(ms, 0.9):.0f} ms, "
        f"p99 {pct(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"
    )
    return 0 if pct(ms, 0.99) <= 250 else 2


if __name__ == "__main__":
    raise SystemExit(main())
