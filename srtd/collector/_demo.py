"""`srtd collector --demo`: fill a fresh collector from a few real local toy jobs.

Runs, one after another on this machine, the recipes in srtd/collector/demo/ (a
three-point sweep of the toy stack and a job whose infrastructure fails), each
reporting to the collector with `units: true`, so a newcomer sees a populated jobs
table, a job page with its units and timeline, and a sweep page, within a minute.
The jobs are ordinary `srtd run` processes; their log directories go beside the db.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

DEMO = Path(__file__).with_name("demo")
PLACEHOLDER = "http://127.0.0.1:8080"
# (recipe, variant) in the order they run
JOBS = (
    ("toy-sweep.yaml", "concurrency=1"),
    ("toy-sweep.yaml", "concurrency=2"),
    ("toy-sweep.yaml", "concurrency=4"),
    ("failing.yaml", None),
)


def _environment(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRTCTL_"))}
    if token is not None:
        env["SRTCTL_STATUS_TOKEN"] = token
    return env


async def fill(url: str, workdir: Path, token: str | None, say: Callable[[str], None]) -> int:
    """Run the demo jobs against `url`; the number that ran as expected (the failing one fails)."""
    workdir.mkdir(parents=True, exist_ok=True)
    expected = 0
    for i, (name, variant) in enumerate(JOBS):
        recipe = workdir / name
        recipe.write_text((DEMO / name).read_text().replace(PLACEHOLDER, url))
        argv = [sys.executable, "-m", "srtd", "run", str(recipe), "--log-dir", str(workdir / f"job-{i}")]
        argv += ["--job-id", f"{os.getpid()}-{i}"]
        if variant is not None:
            argv += ["--variant", variant]
        say(f"demo: running {name}" + (f" [{variant}]" if variant else ""))
        done = await anyio.run_process(argv, env=_environment(token), check=False)
        wanted = 1 if name == "failing.yaml" else 0
        if done.returncode == wanted:
            expected += 1
        else:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            say(f"demo: {name} exited {done.returncode}: {tail[0]}")
    say(f"demo: {expected} of {len(JOBS)} jobs ran as expected; browse {url}/")
    return expected
