"""`srtd collector --demo`: fill a fresh collector from a few real local toy jobs.

Runs, one after another on this machine, the recipes in srtd/collector/demo/ (a
three-point sweep of the toy stack and a job whose infrastructure fails), each
reporting to the collector with `units: true`, so a newcomer sees a populated jobs
table, a job page with its units and timeline, and a sweep page, within a minute.
The jobs are ordinary `srtd run` processes; their log directories go beside the db.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

DEMO = Path(__file__).with_name("demo")
PLACEHOLDER = "http://127.0.0.1:8080"
STOP_WAIT = 20.0  # seconds a demo job gets to tear down when the collector stops
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


async def _run_job(argv: list[str], token: str | None) -> tuple[int, str]:
    """One `srtd run`; its exit code and last line of stderr.  Cancelled (the collector is
    stopping): the job gets SIGTERM and its tiered teardown, never a SIGKILL that would
    leave its units behind."""
    async with await anyio.open_process(
        argv, env=_environment(token), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    ) as proc:
        try:
            assert proc.stderr is not None
            err = bytearray()
            async for chunk in proc.stderr:
                err += chunk
            code = await proc.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_WAIT):
                proc.terminate()
                await proc.wait()
            raise
    lines = err.decode(errors="replace").strip().splitlines()
    return code, lines[-1] if lines else ""


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
        code, tail = await _run_job(argv, token)
        wanted = 1 if name == "failing.yaml" else 0
        if code == wanted:
            expected += 1
        else:
            say(f"demo: {name} exited {code}: {tail}")
    say(f"demo: {expected} of {len(JOBS)} jobs ran as expected; browse {url}/")
    return expected
