"""The failures that matter, on the real stack: a mocker killed mid-benchmark, and a fatal engine line.

The benchmark runs aiperf at 2 requests per second (`req_rate: 2`, concurrency 1):
slow enough that the kill lands mid-benchmark with few requests in flight, and a
request routed to the dead worker (its registration outlives it until its etcd lease
expires, about 20 s) is retried on the other one by the frontend's request migration
(`migration-limit: 3` in the recipe), so aiperf sees no error.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.dynamo.stack import AGG, Job, Stack, aiperf_records, derive, first_pid, in_session, start
from tests.supervisor.helpers import assert_no_leftovers, check_journal, wait_for

pytestmark = [in_session, pytest.mark.slow]

SLOW_BENCH = {"concurrencies": [1], "req_rate": 2}


def kill_mid_benchmark(job: Job, unit: str, after_requests: int = 8) -> float:
    """SIGKILL `unit` once aiperf has recorded some requests; the wall-clock time of the kill."""
    seen = wait_for(job.log_dir, lambda es: any(e.unit == "benchmark" and e.state == "starting" for e in es), 120)
    deadline = time.monotonic() + 120
    while aiperf_records(job.log_dir) < after_requests:
        assert time.monotonic() < deadline, "aiperf recorded no requests"
        assert job.proc.poll() is None, "the job ended before the benchmark got going"
        time.sleep(0.1)
    os.kill(first_pid(seen, unit), signal.SIGKILL)
    return time.time()


def test_a_killed_mocker_is_restarted_registers_again_and_the_job_succeeds(tmp_path: Path, stack: Stack) -> None:
    recipe = derive(
        AGG,
        tmp_path / "restart.yaml",
        roles={"agg": {"restart": {"policy": "on-failure", "backoff_seconds": 1}}},
        benchmark={**SLOW_BENCH, "num_requests": 100},
    )
    job = start(stack, recipe, tmp_path)
    try:
        wait_for(job.log_dir, lambda es: any(e.unit == "benchmark" and e.state == "starting" for e in es), 120)
        before = {i for _, i in job.generate_instances()}
        assert len(before) == 2
        kill_mid_benchmark(job, "agg_1_node1")
        wait_for(
            job.log_dir, lambda es: any(e.unit == "agg_1_node1" and e.state == "ready" and e.attempt == 1 for e in es)
        )
        # The frontend counts the new registration; the dead one goes when its lease expires.
        deadline = time.monotonic() + 60
        while True:
            now = {i for _, i in job.generate_instances()}
            if len(now) == 2 and len(now - before) == 1:
                break
            assert time.monotonic() < deadline, f"/health lists {now}, before the kill {before}"
            time.sleep(0.5)
    finally:
        out = job.finish()
    assert job.proc.returncode == 0, out
    journal = check_journal(job.log_dir / "events.jsonl", [])
    mine = [(e.state, e.attempt) for e in journal if e.unit == "agg_1_node1"]
    assert mine[:3] == [("waiting", None), ("starting", 0), ("ready", 0)]
    assert mine[3:7] == [("exited", 0), ("backoff", 1), ("starting", 1), ("ready", 1)]
    exited = next(e for e in journal if e.unit == "agg_1_node1" and e.state == "exited")
    assert exited.signal == signal.SIGKILL
    result = json.loads((job.log_dir / "benchmark.json").read_text())
    assert (result["requests"], result["errors"]) == (100, 0)
    assert_no_leftovers(str(job.log_dir))


def test_restart_never_on_a_critical_worker_fails_the_job_within_a_second(tmp_path: Path, stack: Stack) -> None:
    recipe = derive(AGG, tmp_path / "never.yaml", benchmark={**SLOW_BENCH, "num_requests": 400})
    job = start(stack, recipe, tmp_path)
    try:
        killed_at = kill_mid_benchmark(job, "agg_1_node1")
    finally:
        out = job.finish()
    assert job.proc.returncode == 1, out
    journal = check_journal(job.log_dir / "events.jsonl", [])
    failed = next(e for e in journal if e.unit == "agg_1_node1" and e.state == "failed")
    stopping = next(e for e in journal if e.unit is None and e.state == "stopping")
    assert stopping.ts - killed_at < 1.0, f"the job stopped {stopping.ts - killed_at:.2f} s after the kill"
    assert failed.signal == signal.SIGKILL
    assert "agg_1_node1" in (stopping.reason or "")
    assert journal[-1].state == "failed"
    # the console names the worker, its exit and its log tail
    assert "agg_1_node1" in out
    assert "SIGKILL" in out
    last_line = (job.log_dir / "workers" / "node1_agg_w1.out").read_text().splitlines()[-1]
    assert last_line.strip()[-40:] in out
    assert_no_leftovers(str(job.log_dir))


def test_a_fatal_engine_line_fails_the_job_at_once(tmp_path: Path, stack: Stack) -> None:
    # A panicked tokio task leaves the mocker up and serving nothing: only the log says so.
    # The setup script (run in each worker's step before the engine) prints the panic
    # line a few seconds later, mid-benchmark, from the worker's own process group.  Each worker
    # stamps its own marker: the teardown may kill the other's mid-write.
    marker = tmp_path / "panicked-at"
    script = tmp_path / "panic.sh"
    script.write_text(
        "( sleep 6\n"
        f'  date +%s.%N > {marker}."$SRTD_UNIT"\n'
        "  echo \"thread 'tokio-runtime-worker' panicked at lib/llm/src/mocker/engine.rs:1:1:\"\n"
        ") &\n"
    )
    recipe = derive(
        AGG, tmp_path / "fatal.yaml", setup_script=str(script), benchmark={**SLOW_BENCH, "num_requests": 400}
    )
    job = start(stack, recipe, tmp_path)
    out = job.finish()
    assert job.proc.returncode == 1, out
    journal = check_journal(job.log_dir / "events.jsonl", [])
    stopping = next(e for e in journal if e.unit is None and e.state == "stopping")
    assert "fatal log line: thread 'tokio-runtime-worker' panicked at" in (stopping.reason or "")
    culprit = next(e for e in journal if e.state == "failed" and e.unit is not None)
    assert culprit.unit in ("agg_0_node1", "agg_1_node1")
    line_at = float(marker.with_name(f"{marker.name}.{culprit.unit}").read_text())
    assert stopping.ts - line_at < 3.0, f"the job stopped {stopping.ts - line_at:.2f} s after the fatal line"
    assert "panicked at" in (job.log_dir / "postmortem.txt").read_text()
    assert_no_leftovers(str(job.log_dir))
