"""The local agg run of the real Dynamo stack, timed: `srtd run recipes/local/dynamo-agg.yaml`.

    nox -s dynamo                      # once: prepares .nox/dynamo-stack
    python perf/dynamo_agg.py [--runs 3] [--stack .nox/dynamo-stack] [--shared-network]

As root it moves into a network namespace of its own first (`unshare -n`), so the
recipe's fixed ports collide with nothing else on the machine.

Per run, from the journal, the frontend's log and srtd's own process times:

- all ready: job start -> the job's `running` event (every unit ready, the benchmark launched);
- gate latency: the first moment the frontend's /health lists both workers' `generate`
  instances (this script polls it every 20 ms) -> the gate's `ready` event;
- wall: the whole `srtd run`, aiperf included;
- srtd CPU: user + system time of the srtd process itself (not of the units it runs),
  read with os.times() as it exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "local" / "dynamo-agg.yaml"
FRONTEND_HEALTH = "http://127.0.0.1:8000/health"

# srtd as `python -m srtd`, writing its own process times to a file when it exits.
WRAPPER = (
    "import atexit, json, os, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "def report():\n"
    "    t = os.times()\n"
    "    with open(out, 'w') as f:\n"
    "        json.dump({'user': t.user, 'system': t.system}, f)\n"
    "atexit.register(report)\n"
    "sys.argv[0] = 'srtd'\n"
    "runpy.run_module('srtd', run_name='__main__')\n"
)


def stack_env(stack: Path, home: Path) -> dict[str, str]:
    settings = {"aiperf": str(stack / "aiperf" / "bin" / "aiperf")}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRTD_"))}
    env["PATH"] = f"{stack / 'ai-dynamo' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["SRTD_BINARIES"] = json.dumps(settings)
    env["HOME"] = str(home)  # the frontend's model-card cache
    return env


def private_network() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode == 0


def first_registered(proc: subprocess.Popen[str], workers: int) -> float | None:
    """Wall-clock time at which the frontend's /health first lists `workers` generate instances."""
    with httpx.Client(timeout=0.5) as client:
        while proc.poll() is None:
            try:
                body = client.get(FRONTEND_HEALTH).json()
            except (httpx.HTTPError, ValueError):
                body = {}
            now = time.time()
            if sum(1 for i in body.get("instances", []) if i.get("endpoint") == "generate") >= workers:
                return now
            time.sleep(0.02)
    return None


def one_run(stack: Path, workers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="srtd-dynamo-bench-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        times_file = root / "srtd-times.json"
        log_dir = root / "logs"
        argv = [sys.executable, "-c", WRAPPER, str(times_file), "run", str(RECIPE), "--log-dir", str(log_dir)]
        env = stack_env(stack, root / "home")
        console = root / "console.txt"
        with console.open("w") as sink:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, cwd=root, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
            registered = first_registered(proc, workers)
            proc.wait()
            wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"srtd run failed ({proc.returncode}):\n{console.read_text()[-3000:]}")
        if registered is None:
            sys.exit("the frontend's /health never listed every worker")
        events = [json.loads(line) for line in (log_dir / "events.jsonl").read_text().splitlines() if line]
        t0 = events[0]["ts"]
        running = next(e["ts"] for e in events if e.get("unit") is None and e["state"] == "running")
        gate = next(e["ts"] for e in events if e.get("unit") == "frontend_0" and e["state"] == "ready")
        cpu = json.loads(times_file.read_text())
        return {
            "all_ready_s": running - t0,
            "gate_latency_s": gate - registered,
            "wall_s": wall,
            "srtd_cpu_s": cpu["user"] + cpu["system"],
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stack", type=Path, default=REPO / ".nox" / "dynamo-stack")
    parser.add_argument("--shared-network", action="store_true", help="Do not move into a network namespace.")
    args = parser.parse_args()
    if not args.shared_network and private_network():
        # The recipe's ports are fixed (etcd 2379, the frontend 8000): in a network namespace
        # of its own (root only) nothing else on the machine can hold them.
        reexec = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--shared-network"]
        os.execvp("unshare", ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', *reexec])
    runs = [one_run(args.stack.resolve(), workers=2) for _ in range(args.runs)]
    for key, label in (
        ("all_ready_s", "all ready"),
        ("gate_latency_s", "gate after last registration"),
        ("wall_s", "wall (aiperf included)"),
        ("srtd_cpu_s", "srtd CPU (user+system)"),
    ):
        values = [r[key] for r in runs]
        print(
            f"{label:30} min {min(values):6.2f} s  median {statistics.median(values):6.2f} s  "
            f"max {max(values):6.2f} s  over {len(values)} runs"
        )


if __name__ == "__main__":
    main()
