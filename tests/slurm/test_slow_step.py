"""A stop while srun still waits for Slurm to create a step does not wait for it.

Slurm can take long to create a step (busy nodes); srtd waits up to 20 s for the step's
id, but a teardown must not.  The dev cluster creates steps at once, so one unit's
`srun` is a stand-in that holds back for minutes before it execs the real srun; every
other step is real.  The stand-in's path carries the test's token, so a stand-in left
running would show in the process table check.

The stop comes once the real `registry` step is ready: a stop that lands while Slurm
is still launching a real step is Slurm's own race (srun, signalled then, may wait
KillWait + 2 s for the step, which then lingers in squeue), not what this test is about.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    custom_job,
    final_job_event,
    journal,
    plan_job,
    proc_command,
    run_script,
    sbatch,
    unit_finals,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")

SLOW_SRUN = """\
import os, shutil, sys, time
from pathlib import Path
from typing import Any
here = Path(sys.argv[0]).resolve().parent
if "--job-name=service_slow" in sys.argv:
    (here / "slow-srun-started").write_text(str(os.getpid()))
    time.sleep(600)  # Slurm "still creating the step"; SIGTERM ends it
path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != here)
os.execv(shutil.which("srun", path=path), ["srun", *sys.argv[1:]])
"""


def ready(log_dir: Path, unit: str) -> bool:
    path = log_dir / "events.jsonl"
    return path.exists() and any(e.get("unit") == unit and e["state"] == "ready" for e in journal(log_dir))


def timeline(events: list[dict[str, Any]]) -> str:
    """The journal as `+seconds unit state`, to say where a slow teardown spent its time."""
    start = events[0]["ts"]
    return "\n".join(f"+{e['ts'] - start:.3f} {e.get('unit') or 'job'} {e['state']}" for e in events)


def test_a_stop_while_srun_waits_for_its_step_ends_the_job_at_once(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    bin_dir = tmp_path / token / "bin"
    bin_dir.mkdir(parents=True)
    srun = bin_dir / "srun"
    srun.write_text(f"#!{sys.executable}\n{SLOW_SRUN}")
    srun.chmod(0o755)
    record = tmp_path / "record"
    slow = f"""\
  - name: slow
    command: {proc_command(token, record)}
    start: infra
    placement: {{node: head}}
"""
    recipe = tmp_path / "slow.yaml"
    recipe.write_text(custom_job("slow", token, record, services=slow))
    log_dir = tmp_path / "logs"
    plan = plan_job(recipe, tmp_path, "node[1-2]", log_dir)
    script = run_script(plan, 2).replace("\nexec ", f"\nexport PATH={bin_dir}:$PATH\nexec ", 1)
    job = sbatch(script, tmp_path, "--nodelist=node[1-2]")

    wait_for("the stand-in srun to hold back", (bin_dir / "slow-srun-started").exists, timeout=180)
    wait_for("the registry to be ready", lambda: ready(log_dir, "service_registry"), timeout=60)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True)
    asked = time.monotonic()
    wait_for(f"job {job} to end", lambda: final_job_event(journal(log_dir))["state"] == "cancelled", timeout=60)
    # srtd waits 20 s for a step id; a teardown that waited for it would take that long
    assert time.monotonic() - asked < 15, timeline(journal(log_dir))

    events = journal(log_dir)
    assert [e["state"] for e in events if e.get("unit") == "service_slow"] == ["starting", "stopping", "stopped"]
    starting = next(e for e in events if e.get("unit") == "service_slow")
    assert "step" not in (starting.get("detail") or {})  # Slurm never made one
    stop = next(e for e in events if e.get("unit") is None and e["state"] == "stopping")
    finals = unit_finals(events)
    assert finals["service_slow"]["ts"] - stop["ts"] < 10
    assert finals["service_slow"]["signal"] == 15  # srtd's SIGTERM reached the waiting srun
    assert not (record / "service_slow.0.start").exists()  # the unit itself never ran
    nothing_left(job)
