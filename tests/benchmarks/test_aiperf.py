"""The aiperf benchmark: the registry row's command line, and the `srtd-aiperf` driver run
against a stand-in aiperf (tests/benchmarks/fake_aiperf.py) that writes aiperf's exports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.errors import PlanError
from tests.plan._util import plan, plan_error

FAKE = Path(__file__).with_name("fake_aiperf.py")

BODY = """\
engine: {type: mocker}
roles:
  agg: {nodes: 1, workers: 2, gpus: 4}
frontend: {type: dynamo, enable_multiple_frontends: false}
benchmark:
  type: aiperf
  isl: 128
  osl: 16
  concurrencies: "1x8"
  num_requests: 30
  req_rate: 2
  stream_output: true
"""


def test_the_row_runs_the_driver_against_the_frontend_with_the_model_dir_as_tokenizer() -> None:
    cluster = Cluster(binaries={"aiperf": "/opt/aiperf/bin/python -m aiperf"})
    bench = next(u for u in plan(BODY, cluster, local=True).units if u.name == "benchmark")
    assert bench.argv == (
        "srtd-aiperf",
        "--aiperf",
        "/opt/aiperf/bin/python -m aiperf",
        "--url",
        "http://127.0.0.1:8000",
        "--model",
        "m",
        "--tokenizer",
        "/models/m",
        "--isl",
        "128",
        "--osl",
        "16",
        "--concurrency",
        "1",
        "--concurrency",
        "8",
        "--requests",
        "30",
        "--request-rate",
        "2",
        "--artifacts",
        f"{bench.env['SRTD_LOG_DIR']}/aiperf",
        "--output",
        f"{bench.env['SRTD_LOG_DIR']}/benchmark.json",
    )
    assert bench.echo is True
    assert bench.terminal is True


def test_aiperf_on_path_by_default_and_one_level_from_concurrency() -> None:
    body = BODY.replace('concurrencies: "1x8"', "concurrency: 3").replace("  req_rate: 2\n", "")
    argv = next(u for u in plan(body, local=True).units if u.name == "benchmark").argv
    assert argv[1:3] == ("--aiperf", "aiperf")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--concurrency"] == ["3"]
    assert "--request-rate" not in argv


def test_a_malformed_concurrency_string_is_a_plan_error() -> None:
    message = plan_error(BODY.replace('"1x8"', '"1xeight"'), local=True)
    assert message == "benchmark.concurrencies: '1xeight' is not an x-separated list of positive numbers"


def driver(tmp_path: Path, *levels: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    tokenizer = tmp_path / "model"
    tokenizer.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "srtd.benchmarks.aiperf", "--aiperf", f"{sys.executable} {FAKE}"]
    argv += ["--url", "http://127.0.0.1:8000", "--model", "tiny", "--tokenizer", str(tokenizer)]
    for level in levels:
        argv += ["--concurrency", level]
    argv += ["--requests", "5", "--artifacts", str(tmp_path / "aiperf"), "--output", str(tmp_path / "bench.json")]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=60, check=False)


def test_the_driver_runs_one_aiperf_per_level_and_summarises(tmp_path: Path) -> None:
    done = driver(tmp_path, "1", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "bench.json").read_text())
    assert (result["requests"], result["errors"], result["failures"]) == (10, 0, [])
    assert [
        (lv["concurrency"], lv["requests"], lv["errors"], lv["ttft_p50_ms"], lv["ttft_p99_ms"], lv["itl_avg_ms"])
        for lv in result["levels"]
    ] == [(1, 5, 0, 10.0, 20.0, 1.25), (4, 5, 0, 40.0, 80.0, 1.25)]
    assert [lv["output_tokens_per_s"] for lv in result["levels"]] == [100.0, 400.0]
    # one table at the end, aiperf's own output in its artifact directory
    lines = done.stdout.splitlines()
    assert sum("TTFT p50 ms" in line for line in lines) == 1
    assert "fake aiperf: done" not in done.stdout
    assert (tmp_path / "aiperf" / "c4" / "aiperf.out").read_text() == "fake aiperf: done\n"
    fake = json.loads((tmp_path / "aiperf" / "c1" / "fake.json").read_text())
    # a local tokenizer directory: aiperf 0.13.0 cannot load it with HF_HUB_OFFLINE set
    assert fake["offline"] is None
    args = fake["argv"]
    assert args[:1] == ["profile"]
    assert args[args.index("--tokenizer") + 1] == str(tmp_path / "model")
    assert args[args.index("--artifact-dir") + 1] == str(tmp_path / "aiperf" / "c1")


def test_any_failed_request_fails_the_run_with_the_first_error(tmp_path: Path) -> None:
    done = driver(tmp_path, "2", env={"FAKE_AIPERF_ERRORS": "2"})
    assert done.returncode == 1
    result = json.loads((tmp_path / "bench.json").read_text())
    assert (result["requests"], result["errors"]) == (5, 2)
    assert result["failures"][0].startswith("concurrency 2: 2/5 requests failed; first error: ")
    assert "no worker" in result["failures"][0]
    assert "srtd-aiperf: FAILED: concurrency 2: 2/5 requests failed" in done.stdout


def test_every_request_failed_no_summary_json_still_counts(tmp_path: Path) -> None:
    done = driver(tmp_path, "1", env={"FAKE_AIPERF_ERRORS": "5", "FAKE_AIPERF_EXIT": "1"})
    assert done.returncode == 1
    level = json.loads((tmp_path / "bench.json").read_text())["levels"][0]
    assert (level["requests"], level["errors"], level["ttft_p50_ms"], level["exit_code"]) == (5, 5, None, 1)
    # the tail of aiperf's output is in the benchmark's log
    assert "srtd-aiperf:   fake aiperf: done" in done.stdout


def test_a_non_zero_aiperf_exit_fails_even_without_request_errors(tmp_path: Path) -> None:
    done = driver(tmp_path, "1", env={"FAKE_AIPERF_EXIT": "3"})
    assert done.returncode == 1
    assert json.loads((tmp_path / "bench.json").read_text())["failures"] == ["concurrency 1: aiperf exited with 3"]


def test_a_missing_aiperf_says_so(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "srtd.benchmarks.aiperf", "--aiperf", str(tmp_path / "nope"), "--url", "u"]
    argv += ["--model", "m", "--tokenizer", "t", "--concurrency", "1", "--artifacts", str(tmp_path / "a")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"srtd-aiperf: cannot run {tmp_path / 'nope'}: " in done.stdout


def test_a_zero_concurrency_level_is_a_plan_error() -> None:
    with pytest.raises(PlanError):
        plan(BODY.replace('"1x8"', '"0"'), local=True)


HOOK = """\
import os, sys
with open(os.environ["HOOK_LOG"], "a") as f:
    f.write(sys.argv[1] + "\\n")
sys.exit(int(os.environ.get("HOOK_FAILS_ON_" + sys.argv[1].upper(), "0")))
"""


def test_each_level_is_its_own_nsys_window_when_the_job_has_one(tmp_path: Path) -> None:
    hook = tmp_path / "nsys_window.py"
    hook.write_text(HOOK)
    log = tmp_path / "hooks.log"
    env = {"SRT_NSYS_CONTROL_SCRIPT": str(hook), "SRT_NSYS_CONTROL_DIR": str(tmp_path), "HOOK_LOG": str(log)}
    done = driver(tmp_path, "1", "4", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log.read_text().split() == ["start", "stop", "start", "stop"]
    # and around each aiperf run: a level's artifacts exist only for the windows that opened
    assert sorted(p.name for p in (tmp_path / "aiperf").iterdir()) == ["c1", "c4"]


def test_a_window_that_does_not_open_fails_the_run_before_any_request(tmp_path: Path) -> None:
    hook = tmp_path / "nsys_window.py"
    hook.write_text(HOOK)
    env = {"SRT_NSYS_CONTROL_SCRIPT": str(hook), "SRT_NSYS_CONTROL_DIR": str(tmp_path), "HOOK_LOG": str(tmp_path / "l")}
    done = driver(tmp_path, "1", "4", env={**env, "HOOK_FAILS_ON_START": "1"})
    assert done.returncode == 1
    assert "FAILED: concurrency 1: the Nsight Systems window did not start (exit 1)" in done.stderr + done.stdout
    assert not (tmp_path / "aiperf").exists() or not any((tmp_path / "aiperf").iterdir())
    assert json.loads((tmp_path / "bench.json").read_text())["levels"] == []


def test_each_level_is_a_measurement_window_when_the_job_measures_power(tmp_path: Path) -> None:
    windows = tmp_path / "power" / "windows"
    before = time.time()
    done = driver(tmp_path, "1", "4", env={"SRT_MEASUREMENT_WINDOW_DIR": str(windows), "FAKE_AIPERF_ERRORS": "0"})
    after = time.time()
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in windows.iterdir()) == ["aiperf_c1.json", "aiperf_c4.json"]  # no temporary left
    one, four = (json.loads((windows / f"aiperf_c{c}.json").read_text()) for c in (1, 4))
    for doc, concurrency in ((one, 1), (four, 4)):
        assert {k: doc[k] for k in ("schema_version", "benchmark_type", "concurrency", "status", "reason")} == {
            "schema_version": 1,
            "benchmark_type": "aiperf",
            "concurrency": concurrency,
            "status": "completed",
            "reason": None,
        }
        start, end = doc["benchmark_start_time_unix"], doc["benchmark_end_time_unix"]
        assert before <= start < end <= after
        assert doc["duration"] == round(end - start, 6)
    # the levels run one after the other: their windows do not overlap
    assert one["benchmark_end_time_unix"] <= four["benchmark_start_time_unix"]


def test_a_failed_level_marks_its_window_failed_with_the_reason(tmp_path: Path) -> None:
    windows = tmp_path / "windows"
    done = driver(tmp_path, "2", env={"SRT_MEASUREMENT_WINDOW_DIR": str(windows), "FAKE_AIPERF_EXIT": "3"})
    assert done.returncode == 1
    doc = json.loads((windows / "aiperf_c2.json").read_text())
    assert (doc["status"], doc["reason"]) == ("failed", "aiperf exited with 3")
