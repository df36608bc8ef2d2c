"""The floor of srtd's design for the peers' start scenario: an anyio program that reads a saved
plan and starts each unit as the local launcher does (behind `setpriv --pdeathsig`, in a session
of its own, its log file open on stdout and stderr, the environment plus SRTD_UNIT), and then
waits.  No graph, journal, console, checks or guardian: what srtd adds above this is srtd's own
cost (docs/performance.md, side by side).

    python perf/_floor.py PLAN.json
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import anyio


async def launch_all(plan: dict[str, object]) -> None:
    setpriv = shutil.which("setpriv")
    prefix = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    env = dict(os.environ)
    log_dir = str(plan["log_dir"])
    os.makedirs(log_dir, exist_ok=True)
    for unit in plan["units"]:  # type: ignore[attr-defined]
        with open(os.path.join(log_dir, f"{unit['name']}.log"), "wb") as out:
            subprocess.Popen(
                [*prefix, *unit["argv"]],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**env, "SRTD_UNIT": unit["name"]},
                start_new_session=True,
                close_fds=True,
            )
    await anyio.sleep_forever()


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    anyio.run(launch_all, plan)


if __name__ == "__main__":
    main()
