"""`observability.enabled` on this machine: the Nsight Systems window opens and closes around the benchmark.

A real `srtd run` of toy workers; `nsys` on PATH is `tests/programs/fake_nsys.py`, which
records every call (in order, in one file the benchmark also writes its markers to) and
writes the reports nsys would.  The benchmark is a custom client calling the window hooks
the way srt-slurm's scripts do.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.command import run_srtd
from tests.supervisor.helpers import assert_no_leftovers, check_journal

REPO = Path(__file__).resolve().parents[2]
FAKE_NSYS = REPO / "tests" / "programs" / "fake_nsys.py"

pytestmark = pytest.mark.slow

RECIPE = """\
schema: 2
name: nsys-window
model: {path: "hf:srtd/toy", container: toy, precision: bf16}
resources: {gpu_type: cpu, gpus_per_node: 2}
engine: {type: toy, token_latency_ms: 1}
roles:
  agg: {nodes: 1, workers: 2, gpus: 1}
frontend: {type: toy-router, enable_multiple_frontends: false}
observability:
  enabled: true
  tachometer: {enabled: false}
  nsys: {cpu_sampling: none, report_timeout_secs: 60}
benchmark:
  type: custom
  command: >-
    python3 "$SRT_NSYS_CONTROL_SCRIPT" start &&
    echo '["client", "requests"]' >> "$FAKE_NSYS_LOG" &&
    srtd-toy-bench --url "http://$SRT_FRONTEND_HOST:$SRT_FRONTEND_PORT" --model toy
    --requests 8 --concurrency 2 --max-tokens 4 --output "$SRTD_LOG_DIR/benchmark.json" &&
    echo '["client", "done"]' >> "$FAKE_NSYS_LOG" &&
    python3 "$SRT_NSYS_CONTROL_SCRIPT" stop
"""


def test_the_window_opens_after_every_worker_is_captured_and_closes_with_reports_after_the_traffic(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").symlink_to(FAKE_NSYS)
    calls = tmp_path / "nsys.jsonl"
    recipe = tmp_path / "nsys.yaml"
    recipe.write_text(RECIPE)
    log_dir = tmp_path / "logs"
    env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "FAKE_NSYS_LOG": str(calls),
        "FAKE_NSYS_STATE": str(tmp_path / "sessions"),
    }
    proc = run_srtd("run", str(recipe), "--log-dir", str(log_dir), env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    journal = check_journal(log_dir / "events.jsonl", [])
    assert (journal[-1].state, journal[-1].exit_code) == ("succeeded", 0)

    lines = [json.loads(line) for line in calls.read_text().splitlines()]
    order = [line[0] if line[0] != "client" else line[1] for line in lines]
    # two workers: each launched idle, started before any request, stopped after the last, shut down
    assert order == ["launch"] * 2 + ["start"] * 2 + ["requests", "done"] + ["stop"] * 2 + ["shutdown"] * 2
    profiles = log_dir / "profiles"
    starts = sorted(line for line in lines if line[0] == "start")
    assert starts == [
        ["start", "--gpu-metrics-devices=none", "--sample=none", "--cpuctxsw=none",
         f"--output={profiles}/agg/node1_agg_w{i}_profile_gpu{i}_window001", "--force-overwrite=true",
         f"--session=srtd-agg_{i}_node1-0-{pid}"]
        for i, pid in enumerate(_wrapper_pids(lines))
    ]  # fmt: skip
    reports = sorted(p.relative_to(profiles).as_posix() for p in profiles.rglob("*.nsys-rep"))
    assert reports == [
        "agg/node1_agg_w0_profile_gpu0_window001.nsys-rep",
        "agg/node1_agg_w1_profile_gpu1_window001.nsys-rep",
    ]
    barriers = sorted(p.relative_to(profiles).as_posix() for p in (profiles / ".stopped").rglob("*.json"))
    assert barriers == [".stopped/agg_0_node1/agg_0_node1-0.json", ".stopped/agg_1_node1/agg_1_node1-0.json"]
    result = json.loads((log_dir / "benchmark.json").read_text())
    assert (result["requests"], result["errors"]) == (8, 0)
    assert_no_leftovers(str(log_dir))


def _wrapper_pids(lines: list[list[str]]) -> list[str]:
    """Each worker's wrapper pid, from its session name (`srtd-<step>-<rank>-<pid>`), in worker order."""
    sessions = sorted(line[1].removeprefix("--session-new=") for line in lines if line[0] == "launch")
    return [s.rsplit("-", 1)[1] for s in sessions]
