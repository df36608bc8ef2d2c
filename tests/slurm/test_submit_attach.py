"""`srtd submit --attach`: the job in the queue, starting, the live view to its end; the job's exit code."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.command import SRTD
from tests.slurm.conftest import CLUSTER_CONFIG, job_state, squeue_steps, srtd, wait_for

pytestmark = pytest.mark.usefixtures("slurm")


def recipe(token: str) -> str:
    # Held back 4 s by --begin, so the queue phase is seen; the benchmark ends the job with code 3.
    return f"""\
schema: 2
name: live-{token}
model: {{path: /models/none, container: none, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 1}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
sbatch_directives: {{begin: "now+4"}}
services:
  - name: idle
    command: [sleep, "3600", "{token}"]
benchmark:
  type: custom
  command: "echo measuring; sleep 2; exit 3"
"""


def test_submit_attach_shows_the_queue_the_start_the_run_and_exits_with_the_jobs_code(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(recipe(token))
    done = subprocess.run(
        [*SRTD, "submit", str(path), "--cluster-config", str(CLUSTER_CONFIG), "--attach"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "SRTD_RUNTIME_DIR": f"{tmp_path}/rt"},
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 3, done.stdout + done.stderr
    assert lines[0].startswith("submitted job "), lines
    job = lines[0].split()[2].rstrip(":")
    # one line per phase (Slurm may name the reason a moment after the job is queued), then the
    # live view's last screen: the job's end and every unit
    screen = next(i for i, line in enumerate(lines) if f"(job {job}): failed, exit code 3" in line)
    phases = [line.removeprefix(f"job {job}: ") for line in lines[1:screen]]
    assert phases[0] in ("pending", "pending (BeginTime)"), lines
    assert "pending (BeginTime)" in phases, lines
    assert phases == sorted(phases, key=lambda p: p.startswith("starting")), lines
    assert set(phases) <= {"pending", "pending (BeginTime)", "starting on node1"}, lines
    view = "\n".join(lines[screen:])
    for unit in ("service_idle", "benchmark"):
        assert unit in view
    assert "benchmark exited  exit=exit code 3" in view, view
    assert lines[-1] == f"job {job} (live-{token}): failed, exit code 3", lines
    assert "\x1b[" not in done.stdout  # into a pipe: no escape codes
    nothing_left(job)


def test_ctrl_c_leaves_the_view_and_the_job_goes_on(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(
        recipe(token)
        .replace('sbatch_directives: {begin: "now+4"}\n', "")
        .replace(
            'benchmark:\n  type: custom\n  command: "echo measuring; sleep 2; exit 3"\n', "benchmark: {type: manual}\n"
        )
    )
    watcher = subprocess.Popen(
        [*SRTD, "submit", str(path), "--cluster-config", str(CLUSTER_CONFIG), "--attach"],
        cwd=tmp_path,
        env={**os.environ, "SRTD_RUNTIME_DIR": f"{tmp_path}/rt"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = watcher.stdout.readline() if watcher.stdout else ""
        job = first.split()[2].rstrip(":")
        wait_for("the live view's relay step", lambda: "srtd-relay" in squeue_steps(job).values(), timeout=120)
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=30)
        assert (watcher.returncode, err) == (130, "srtd: interrupted\n"), out
        assert job_state(job)["JobState"] == "RUNNING"  # the job goes on
        wait_for("the relay step to end", lambda: "srtd-relay" not in squeue_steps(job).values(), timeout=30)
    finally:
        watcher.kill()
    done = srtd("stop", job, "--wait", cwd=tmp_path, env={"SRTD_RUNTIME_DIR": f"{tmp_path}/rt"}, timeout=120)
    assert done.returncode == 0, done.stderr
    nothing_left(job)
