"""A unit's process for the Slurm tests: records where it ran and what it received.

    python3 proc.py --record DIR --token T [--host H] [--index I] [--crash-index I]
                    [--ignore-term] [--term-delay S] [--exit-after S] [--code N]

On start it writes `DIR/<unit>.<attempt>.start` (JSON: node, step id, step name, host,
time) and prints `ready <unit>`.  On SIGTERM it writes `DIR/<unit>.<attempt>.term` (the
time), then exits 0 after `--term-delay` (or never, with `--ignore-term`).  The worker
whose index is `--crash-index` exits 3 two seconds after its first start (once per job).
Standard library only: it runs on the bare nodes of the dev cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--record", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--host", default="")
    p.add_argument("--index", default="")
    p.add_argument("--crash-index", default=None)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--term-delay", type=float, default=0.0)
    p.add_argument("--exit-after", type=float, default=None)
    p.add_argument("--code", type=int, default=0)
    p.add_argument("--ready-after", type=float, default=0.0, help="seconds before the ready line")
    args, _ = p.parse_known_args()  # extra words (hostile values in tests) are only recorded
    record = Path(args.record)
    record.mkdir(parents=True, exist_ok=True)
    unit = os.environ.get("SRTD_UNIT", "?")
    attempt = os.environ.get("SRTD_ATTEMPT", "0")
    stem = record / f"{unit}.{attempt}"

    def on_term(signum: int, frame: object) -> None:
        (stem.parent / (stem.name + ".term")).write_text(f"{time.time():.6f}\n")
        if args.ignore_term:
            return
        time.sleep(args.term_delay)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    info = {
        "node": os.environ.get("SLURMD_NODENAME"),
        "step": f"{os.environ.get('SLURM_JOB_ID')}.{os.environ.get('SLURM_STEP_ID')}",
        "step_name": os.environ.get("SLURM_JOB_NAME"),
        "host": args.host,
        "pid": os.getpid(),
        "argv": sys.argv[1:],
        "env": {k: v for k, v in os.environ.items() if k.startswith("H_")},
        "t": time.time(),
    }
    (stem.parent / (stem.name + ".start")).write_text(json.dumps(info))
    time.sleep(args.ready_after)
    print(f"ready {unit}", flush=True)
    crashed = record / f"{unit}.crashed"
    if args.crash_index is not None and args.crash_index == args.index and not crashed.exists():
        time.sleep(2)
        crashed.write_text("")
        print(f"{unit}: crashing on purpose", flush=True)
        return 3
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        return args.code
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
