"""`python -m perf [SCENARIO ...] [--quick] [--no-page]`: run scenarios, write results and the page.

Each scenario writes `perf/results/<name>.json`; afterwards docs/performance.md
is regenerated from every result file there (so one scenario can be rerun alone).
Without a scenario name, all of them run, in the order listed by `--list`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from perf._common import load_average, save

# Measure srtd as installed (pip writes bytecode), not recompiled from source on every
# start: the developers' shells set PYTHONDONTWRITEBYTECODE=1.  Children inherit this.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

Scenario = Callable[[bool], dict[str, Any]]


def scenarios() -> dict[str, Scenario]:
    from perf import _cli, _collector, _latency, _peers, _plan, _relay, _slurm, _watching, node_loss, node_replace

    return {
        "exits": _latency.exits,
        "readiness": _latency.readiness,
        "makespan": _latency.makespan,
        "teardown": _latency.teardown,
        "watching": _watching.watching,
        "plan": _plan.plan_speed,
        "peers": _peers.peers,
        "cli": _cli.cli_speed,
        "collector": _collector.put_storm,
        "attach-relay": _relay.relay,  # needs the dev Slurm cluster (scripts/slurm-dev-cluster up 4)
        "node_loss": node_loss.node_loss,  # needs the dev Slurm cluster; skipped without it
        "node_replace": node_replace.node_replace,  # the same
        **_slurm.SCENARIOS,  # the dev cluster's: in the default list only while it is up
    }


def _default(table: dict[str, Scenario]) -> list[str]:
    from perf._slurm import SCENARIOS, cluster_up

    if cluster_up():
        return list(table)
    print("[bench] no Slurm cluster answers (sinfo): the slurm-* scenarios are left out", file=sys.stderr)
    return [name for name in table if name not in SCENARIOS]


def main(argv: list[str] | None = None) -> int:
    table = scenarios()
    parser = argparse.ArgumentParser(prog="python -m perf", description=__doc__)
    parser.add_argument("scenario", nargs="*", help=f"any of: {', '.join(table)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--no-page", action="store_true", help="do not regenerate docs/performance.md")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(table))
        return 0
    unknown = [s for s in args.scenario if s not in table]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(table)}")
    chosen = args.scenario or _default(table)
    overall = time.monotonic()
    for name in chosen:
        began, load = time.monotonic(), load_average()
        print(f"[bench] {name} (load average {load[0]:.2f}) ...", file=sys.stderr, flush=True)
        data = table[name](args.quick)
        path = save(name, data, began, load)
        print(f"[bench] {name}: {time.monotonic() - began:.1f} s -> {path}", file=sys.stderr, flush=True)
    if not args.no_page:
        from perf._report import write_page

        page = write_page()
        print(f"[bench] wrote {page}", file=sys.stderr)
    print(f"[bench] total {time.monotonic() - overall:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
