"""Tests on the real dev Slurm cluster (`scripts/slurm-dev-cluster up 4`).

They run in the nox session `slurm`, which brings the cluster up and sets
SRTD_TEST_SLURM=1: there a cluster that is not up is a failure, never a skip.  Outside
that session (the default `pytest` run) they are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.command import run_srtd
from tests.supervisor.helpers import leftover_processes

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = ROOT / "scripts" / "slurm-dev-cluster"
CLUSTER_CONFIG = ROOT / "scripts" / "slurm-dev.srtslurm.yaml"
PROC = Path(__file__).resolve().parent / "proc.py"
IN_SESSION = os.environ.get("SRTD_TEST_SLURM") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slurm)
            if not IN_SESSION:
                item.add_marker(pytest.mark.skip(reason="Slurm tests run in `nox -s slurm` (SRTD_TEST_SLURM=1)"))


@pytest.fixture(scope="session")
def slurm() -> None:
    """The dev cluster is up; in the slurm session anything else fails the test."""
    done = subprocess.run([str(CLUSTER_SCRIPT), "status"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"the dev Slurm cluster is not up ({done.stdout.strip()} {done.stderr.strip()})", pytrace=False)


def srtd(
    *args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_srtd(*args, cwd=cwd, timeout=timeout, env=env, drop=())


def squeue_steps(job: str) -> dict[str, str]:
    """{step id: step name} of a job (empty when Slurm lists none)."""
    done = subprocess.run(
        ["squeue", "--steps", f"--jobs={job}", "--noheader", "--format=%i %j"],
        capture_output=True,
        text=True,
        check=False,
    )
    steps = {}
    for line in done.stdout.splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2:
            steps[parts[0]] = parts[1].strip()
    return steps


def job_listed(job: str) -> bool:
    done = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job}", "--format=%i %T"], capture_output=True, text=True, check=False
    )
    return bool(done.stdout.strip())


def job_state(job: str) -> dict[str, str]:
    done = subprocess.run(["scontrol", "--oneliner", "show", "job", job], capture_output=True, text=True, check=False)
    fields = {}
    for word in done.stdout.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    return fields


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def journal(log_dir: Path) -> list[dict[str, Any]]:
    path = log_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def final_job_event(events: list[dict[str, Any]]) -> dict[str, Any]:
    return [e for e in events if e.get("unit") is None][-1]


def unit_finals(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(e["unit"]): e for e in events if e.get("unit") is not None and e["state"] in ("stopped", "failed")}


def sbatch(script: str, cwd: Path, *extra: str) -> str:
    done = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={cwd}", f"--output={cwd}/batch.out", *extra],
        input=script,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().split(";")[0]


def _plan(recipe: Path, cwd: Path, nodes: str, log_dir: Path, view: str) -> str:
    """`srtd plan RECIPE --VIEW` for the dev cluster's `nodes`: its output."""
    done = srtd(
        "plan",
        str(recipe),
        "--nodes",
        nodes,
        "--cluster-config",
        str(CLUSTER_CONFIG),
        "--log-dir",
        str(log_dir),
        f"--{view}",
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def plan_job(
    recipe: Path, cwd: Path, nodes: str, log_dir: Path, edit: Callable[[dict[str, Any]], None] | None = None
) -> Path:
    """`srtd plan --json` for the dev cluster's nodes, edited (e.g. short terminate timeouts)."""
    plan = json.loads(_plan(recipe, cwd, nodes, log_dir, "json"))
    if edit is not None:
        edit(plan)
    path = cwd / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def sbatch_header(recipe: Path, cwd: Path, nodes: str, log_dir: Path) -> list[str]:
    """The `#SBATCH` lines of srtd's own wrapper (`srtd plan --sbatch`): nodes with spares, --no-kill."""
    return [line for line in _plan(recipe, cwd, nodes, log_dir, "sbatch").splitlines() if line.startswith("#SBATCH ")]


def run_script(
    plan: Path,
    nodes: int,
    *,
    time_limit: str = "5",
    signal: str | None = None,
    header: list[str] | None = None,
) -> str:
    """A batch script that execs `srtd run plan.json` (srtd is the batch shell).

    `header`: srtd's own `#SBATCH` lines (`sbatch_header`) instead of the test's.
    """
    lines = ["#!/bin/bash", f"#SBATCH --nodes={nodes}", f"#SBATCH --time={time_limit}", "#SBATCH --job-name=srtd-test"]
    if header is not None:
        lines = ["#!/bin/bash", *header]
    if signal:
        lines.append(f"#SBATCH --signal={signal}")
    lines.append(f"exec {sys.executable} -m srtd run {plan} --cluster-config {CLUSTER_CONFIG}")
    return "\n".join(lines) + "\n"


def proc_command(token: str, record: Path, *args: str) -> str:
    """proc.py's argv as a YAML flow list."""
    words = [sys.executable, str(PROC), "--record", str(record), "--token", token, *args]
    return "[" + ", ".join(json.dumps(w) for w in words) + "]"


def custom_job(
    name: str,
    token: str,
    record: Path,
    *,
    worker_args: tuple[str, ...] = (),
    registry_args: tuple[str, ...] = (),
    role_extra: str = "",
    services: str = "",
    benchmark: str = "{type: manual}",
) -> str:
    """A recipe of proc.py units: two custom workers on two nodes and an infra service `registry`."""
    return f"""\
schema: 2
name: {name}-{token}
model: {{path: /models/none, container: none, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 2}}
engine:
  type: custom
  command: {proc_command(token, record, *worker_args)}
  health:
    log: {{pattern: "^ready"}}
    timeout_seconds: 60
roles:
  agg: {{nodes: 2, workers: 2, gpus: 2{role_extra}}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
services:
  - name: registry
    command: {proc_command(token, record, *registry_args)}
    start: infra
    placement: {{node: infra}}
    readiness: {{log: {{pattern: "^ready"}}}}
{services}benchmark: {benchmark}
"""


@pytest.fixture
def token() -> str:
    return "srtdslurm" + uuid.uuid4().hex[:12]


@pytest.fixture
def nothing_left(token: str) -> Iterator[Callable[[str], None]]:
    """Call with the job id at the end: the job is gone from squeue and no process carries the token."""
    jobs: list[str] = []

    def check(job: str) -> None:
        jobs.append(job)
        wait_for(f"job {job} to leave squeue", lambda: not job_listed(job), timeout=60)
        wait_for("the job's processes to end", lambda: not leftover_processes(token), timeout=20)

    yield check
    for job in jobs:
        subprocess.run(["scancel", job], check=False)


@pytest.fixture
def cluster_restored() -> Iterator[None]:
    """A test that kills a node: the cluster is whole again afterwards (slurmd restarted, node resumed)."""
    yield
    from tests.slurm.node_loss import restore  # node_loss imports this module

    restore()


def started(record: Path, name: str) -> dict[str, Any] | None:
    """proc.py's start record of `<unit>.<attempt>` (`name`), or None when that attempt never ran."""
    path = record / f"{name}.start"
    return json.loads(path.read_text()) if path.exists() else None
