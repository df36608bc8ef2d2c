"""The clock check of a job that samples power, on the dev cluster: `clock_sync_<node>` runs as a
step of the job on the bare node before anything else.  This machine keeps no NTP time (the
kernel says its clock is unsynchronised), so the check fails for real here: under
`telemetry.required` the job fails at it and launches nothing else; without it the job goes on.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plan.test_clock_check import kernel_synchronised
from tests.slurm.conftest import CLUSTER_CONFIG, final_job_event, journal, proc_command, srtd
from tests.supervisor.helpers import free_port

pytestmark = [
    pytest.mark.usefixtures("slurm"),
    pytest.mark.skipif(kernel_synchronised(), reason="this machine's clock is synchronised: the check passes"),
]

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
EXPORTER, WINDOWS = PROGRAMS / "gpu_exporter.py", PROGRAMS / "window_client.py"


def power_job(tmp_path: Path, token: str, *, required: bool) -> str:
    record = tmp_path / "record"
    port = free_port()
    # the client marks one window around two seconds of benchmark (srt-slurm's scripts do the same)
    bench = f'{shlex.join([sys.executable, str(WINDOWS)])} "$SRT_MEASUREMENT_WINDOW_DIR" 8 -- sleep 2'
    exporter = [sys.executable, str(EXPORTER), "--host", "0.0.0.0", "--port", str(port), "--gpus", "2"]
    return f"""\
schema: 2
name: clock-{token}
model: {{path: /models/none, container: none, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 2}}
engine:
  type: custom
  command: {proc_command(token, record)}
  health: {{log: {{pattern: "^ready"}}, timeout_seconds: 60}}
roles:
  agg: {{nodes: 1, workers: 1, gpus: 2}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
telemetry:
  enabled: true
  required: {json.dumps(required)}
  dcgm_exporter:
    kind: custom
    container_image: none
    command: {json.dumps(shlex.join(exporter))}
    port: {port}
    gpu_labels: {{index: gpu}}
    gpu_metrics: {{power: {{metric: DCGM_FI_DEV_POWER_USAGE}}}}
benchmark: {{type: custom, command: {json.dumps(bench)}}}
"""


def submit(tmp_path: Path, text: str) -> tuple[int, str, Path, list[dict[str, object]]]:
    recipe = tmp_path / "clock.yaml"
    recipe.write_text(text)
    done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--wait", "--json", cwd=tmp_path)
    job = json.loads(done.stdout.splitlines()[-1])
    log_dir = Path(job["log_dir"])
    return done.returncode, job["job_id"], log_dir, journal(log_dir)


def assert_the_check_ran_and_failed(job_id: str, log_dir: Path, events: list[dict[str, object]]) -> None:
    starting = next(e for e in events if e.get("unit") == "clock_sync_node1" and e["state"] == "starting")
    assert str(starting["detail"]["step"]).startswith(job_id + ".")  # type: ignore[index]
    failed = next(e for e in events if e.get("unit") == "clock_sync_node1" and e["state"] == "failed")
    assert (failed["exit_code"], failed["reason"]) == (1, "exited with exit code 1")
    lines = (log_dir / "clock_sync_node1.out").read_text().splitlines()
    assert lines[0] == f"{os.uname().nodename}: clock not synchronised"  # every node is this machine
    assert [line.split(":")[0] for line in lines[1:]] == ["  timedatectl", "  chronyc", "  ntpq", "  kernel"]
    assert lines[4].startswith("  kernel: state ")


def test_under_required_power_an_unsynchronised_clock_fails_the_job_before_it_starts(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    code, job_id, log_dir, events = submit(tmp_path, power_job(tmp_path, token, required=True))
    assert code == 1
    assert_the_check_ran_and_failed(job_id, log_dir, events)
    final = final_job_event(events)
    assert (final["state"], final["reason"]) == ("failed", "clock_sync_node1 failed: exited with exit code 1")
    # nothing else of the job ever started: no exporter, no worker, no benchmark
    started = {e.get("unit") for e in events if e["state"] == "starting" and e.get("unit")}
    assert started == {"clock_sync_node1"}
    assert not (tmp_path / "record").exists()
    nothing_left(job_id)


def test_without_required_the_failed_check_is_recorded_and_the_job_goes_on(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    code, job_id, log_dir, events = submit(tmp_path, power_job(tmp_path, token, required=False))
    assert code == 0
    assert_the_check_ran_and_failed(job_id, log_dir, events)
    failed = next(e for e in events if e.get("unit") == "clock_sync_node1" and e["state"] == "failed")
    assert failed["detail"]["ignored"] is True  # type: ignore[index]
    order = [(e.get("unit"), e["state"]) for e in events]
    # the exporter and the worker start only once the check has ended
    assert order.index(("clock_sync_node1", "failed")) < order.index(("service_dcgm-exporter", "starting"))
    assert order.index(("clock_sync_node1", "failed")) < order.index(("agg_0_node1", "starting"))
    # and srtd sampled the exporter on its node over the client's window, as on a clock that is fine
    power = next(e for e in events if e.get("reason", "").startswith("power "))  # type: ignore[union-attr]
    assert power["reason"] == "power complete: 1/1 windows covered"
    assert final_job_event(events)["state"] == "succeeded"
    nothing_left(job_id)
