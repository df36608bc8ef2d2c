"""Power telemetry on this machine: `srtd run` samples a real GPU exporter and judges the client's window.

The exporter is `tests/programs/gpu_exporter.py` (DCGM's power metric over HTTP, run as a
service unit); the benchmark is the toy client under `tests/programs/window_client.py`,
which marks one window around it the way srt-slurm's scripts do.  Local plans run no GPU
exporter of their own, so the test gives the saved plan its `power` section by hand, as
`srtd plan` makes it for a Slurm job with `telemetry.enabled`.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from srtd.errors import EXIT_POWER
from srtd.unit import Plan, PowerEndpoint, PowerSampling
from tests.command import run_srtd
from tests.supervisor.helpers import assert_no_leftovers, check_journal, free_port

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = REPO / "tests" / "programs"

pytestmark = pytest.mark.slow

RECIPE = """\
schema: 2
name: power-window
model: {{path: "hf:srtd/toy", container: toy, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 2}}
engine: {{type: toy, token_latency_ms: 1}}
roles:
  agg: {{nodes: 1, workers: 1, gpus: 1}}
frontend: {{type: toy-router, enable_multiple_frontends: false}}
observability: {{tachometer: {{enabled: false}}}}
services:
  - name: gpus
    command: [{python}, {exporter}, --port, "{port}", --gpus, "2", --watts, "100"]
    readiness: {{http: {{port: {port}, path: /metrics}}, timeout_seconds: 30}}
benchmark:
  type: custom
  command: >-
    {python} {client} {windows} 8 {skip} --
    srtd-toy-bench --url "http://$SRT_FRONTEND_HOST:$SRT_FRONTEND_PORT" --model toy
    --requests 16 --concurrency 8 --max-tokens 8 --output "$SRTD_LOG_DIR/benchmark.json"
"""


def run_with_power(tmp_path: Path, *, window: bool) -> tuple[int, Path, str]:
    port = free_port()
    log_dir = tmp_path / "logs"
    recipe = tmp_path / "power.yaml"
    recipe.write_text(
        RECIPE.format(
            python=sys.executable,
            exporter=PROGRAMS / "gpu_exporter.py",
            client=PROGRAMS / "window_client.py",
            windows=log_dir / "power" / "windows",
            skip="" if window else "--skip",
            port=port,
        )
    )
    planned = run_srtd("plan", str(recipe), "--local", "--json", "--log-dir", str(log_dir))
    assert planned.returncode == 0, planned.stderr
    power = PowerSampling(
        dir=str(log_dir / "power"),
        endpoints=(PowerEndpoint(node="node1", url=f"http://127.0.0.1:{port}/metrics"),),
        metric="DCGM_FI_DEV_POWER_USAGE",
        index_label="gpu",
        identity_label="UUID",
        interval_seconds=0.1,
        required=True,
    )
    plan = replace(Plan.loads(planned.stdout), power=power)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.dumps())
    done = run_srtd("run", str(plan_file), "--local", "--plain", timeout=180)
    assert_no_leftovers(str(log_dir))
    return done.returncode, log_dir, done.stdout + done.stderr


def test_the_windows_power_is_sampled_and_the_job_succeeds(tmp_path: Path) -> None:
    code, log_dir, out = run_with_power(tmp_path, window=True)
    assert code == 0, out
    journal = check_journal(log_dir / "events.jsonl", [])
    power = [e for e in journal if e.detail and "power" in e.detail]
    assert [(e.reason, e.detail) for e in power] == [
        ("power complete: 1/1 windows covered", {"power": {"status": "complete", "reasons": [], "windows": 1}})
    ]
    assert "power complete: 1/1 windows covered" in out  # the console says it as it is
    rows = list(csv.reader((log_dir / "power" / "samples.csv").open()))
    assert rows[0] == ["schema_version", "timestamp_unix", "scrape_seq", "hostname", "gpu_index", "gpu_uuid", "power_w"]
    assert {(r[3], r[4], r[5], r[6]) for r in rows[1:]} == {
        ("node1", "0", "GPU-0000", "100.0"),
        ("node1", "1", "GPU-0001", "110.0"),
    }
    manifest = json.loads((log_dir / "power" / "manifest.json").read_text())
    assert (manifest["status"], manifest["publication_valid"], manifest["reason_codes"]) == ("complete", True, [])
    (window,) = manifest["windows"]
    assert (window["file"], window["benchmark_type"], window["concurrency"]) == ("custom_c8.json", "custom", 8)
    assert window["power_coverage_valid"] is True
    assert window["mean_power_w"] == pytest.approx(210.0)  # 100 W + 110 W, all along
    assert window["max_sample_gap_seconds"] < 3.0


def test_required_power_without_a_window_fails_the_job_with_exit_code_7(tmp_path: Path) -> None:
    code, log_dir, out = run_with_power(tmp_path, window=False)
    assert code == EXIT_POWER, out
    final = check_journal(log_dir / "events.jsonl", [])[-1]
    assert (final.state, final.exit_code) == ("failed", EXIT_POWER)
    assert final.reason == "telemetry.required: power incomplete: 0/0 windows covered: no_measurement_windows"
    manifest = json.loads((log_dir / "power" / "manifest.json").read_text())
    assert (manifest["status"], manifest["reason_codes"]) == ("incomplete", ["no_measurement_windows"])
    assert manifest["samples"] > 0  # the exporter was read; only the client's window is missing


def test_srtd_plan_says_what_is_sampled_and_what_required_means(tmp_path: Path) -> None:
    recipe = tmp_path / "amd.yaml"
    text = (REPO / "recipes" / "features" / "amd-power-telemetry.yaml").read_text()
    recipe.write_text(text.replace("telemetry:\n  enabled: true\n", "telemetry:\n  enabled: true\n  required: true\n"))
    shown = run_srtd("plan", str(recipe), "--nodes", "n1")
    assert shown.returncode == 0, shown.stderr
    assert (
        "power: amd_device_metrics_exporter_gpu_power_usage from 1 exporter(s) every 1 s -> "
        "outputs/local/logs/power/samples.csv, windows checked into manifest.json; "
        "the job fails (exit 7) unless every window is covered"
    ) in shown.stdout.replace("\n", " ").replace("  ", " ")
