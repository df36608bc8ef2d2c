"""srtd's Nsight Systems window program (`srtd/engines/_nsys_window.py`), run for real.

The wrapper and the client are the very file srtd writes into a job's log directory, run
with `python3`; `nsys` is `tests/programs/fake_nsys.py`, which records its argv and writes
the reports nsys would.  The application is a sleeping Python process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import srtd.engines

WINDOW = Path(srtd.engines.__file__).parent / "_nsys_window.py"
FAKE_NSYS = Path(__file__).resolve().parents[1] / "programs" / "fake_nsys.py"
START_ARGS = ["--gpu-metrics-devices=none", "--sample=none", "--cpuctxsw=none"]


@pytest.fixture
def job(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").symlink_to(FAKE_NSYS)
    control = tmp_path / "profiles" / ".control"
    (control / "steps").mkdir(parents=True)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_NSYS_LOG": str(tmp_path / "nsys.jsonl"),
        "FAKE_NSYS_STATE": str(tmp_path / "sessions"),
        "SRT_NSYS_CONTROL_DIR": str(control),
        "SRT_NSYS_CONTROL_TIMEOUT": "20",
        "SRT_NSYS_REPORT_BARRIER_DIR": str(tmp_path / "profiles" / ".stopped" / "agg_0"),
        "SRT_NSYS_REPORT_EXPECTED": "1",
        "SRT_NSYS_REPORT_STOP_TIMEOUT": "20",
    }


SLEEPER = "import time; time.sleep(60)"


def _wrap(env: dict[str, str], step: str = "agg_0", app: str = SLEEPER) -> subprocess.Popen[bytes]:
    control = Path(env["SRT_NSYS_CONTROL_DIR"])
    (control / "steps" / f"{step}.json").write_text('{"ranks": 1}\n')
    out = str(control.parent / "agg" / f"{step}_profile_gpu0")
    spec = {"control_dir": str(control), "step": step, "ranks": 1, "nsys": "nsys", "start_args": START_ARGS}
    spec |= {"output": out, "timeout": 20}
    argv = [sys.executable, str(WINDOW), "worker", "--spec", json.dumps(spec), "--", sys.executable, "-c", app]
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)


def _client(env: dict[str, str], action: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(WINDOW), action]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def _calls(env: dict[str, str]) -> list[list[str]]:
    path = Path(env["FAKE_NSYS_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stop_wrapper(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_start_and_stop_open_one_window_whose_report_is_on_disk_when_stop_returns(job: dict[str, str]) -> None:
    proc = _wrap(job)
    try:
        assert _client(job, "start").returncode == 0
        stopped = _client(job, "stop")
        assert stopped.returncode == 0, stopped.stderr
        report = Path(job["SRT_NSYS_CONTROL_DIR"]).parent / "agg" / "agg_0_profile_gpu0_window001.nsys-rep"
        assert report.read_text() == "fake nsys report\n"
    finally:
        code = _stop_wrapper(proc)
    assert code == 0
    actions = [c[0] for c in _calls(job)]
    assert actions == ["launch", "start", "stop", "shutdown"]
    launch, start = _calls(job)[0], _calls(job)[1]
    session = launch[1].removeprefix("--session-new=")
    assert launch[1:4] == [f"--session-new={session}", "--trace=nvtx", "--show-output=true"]
    assert launch[4:6] == [sys.executable, "-c"]
    base = str(Path(job["SRT_NSYS_CONTROL_DIR"]).parent / "agg" / "agg_0_profile_gpu0_window001")
    assert start == ["start", *START_ARGS, f"--output={base}", "--force-overwrite=true", f"--session={session}"]
    # the report barrier: this rank said it is done, and it was the only one expected
    barrier = Path(job["SRT_NSYS_REPORT_BARRIER_DIR"]) / "agg_0-0.json"
    assert json.loads(barrier.read_text()) == {"ok": True}


def test_a_second_window_gets_its_own_report_and_stop_without_start_is_a_no_op(job: dict[str, str]) -> None:
    proc = _wrap(job)
    try:
        assert _client(job, "stop").returncode == 0  # nothing open: nothing to do
        for _ in range(2):
            assert _client(job, "start").returncode == 0
            assert _client(job, "stop").returncode == 0
    finally:
        _stop_wrapper(proc)
    reports = sorted(p.name for p in (Path(job["SRT_NSYS_CONTROL_DIR"]).parent / "agg").iterdir())
    assert reports == ["agg_0_profile_gpu0_window001.nsys-rep", "agg_0_profile_gpu0_window002.nsys-rep"]


def test_teardown_during_an_open_window_still_writes_its_report(job: dict[str, str]) -> None:
    proc = _wrap(job)
    assert _client(job, "start").returncode == 0
    assert _stop_wrapper(proc) == 0
    assert [c[0] for c in _calls(job)] == ["launch", "start", "stop", "shutdown"]
    report = Path(job["SRT_NSYS_CONTROL_DIR"]).parent / "agg" / "agg_0_profile_gpu0_window001.nsys-rep"
    assert report.is_file()


def test_an_application_that_dies_fails_its_wrapper_and_the_client_says_who(job: dict[str, str]) -> None:
    proc = _wrap(job, app="import sys, time; time.sleep(1.5); sys.exit(3)")
    assert proc.wait(timeout=30) == 1
    assert proc.stderr is not None
    assert "[srtd nsys] agg_0-0: the profiled application exited with 3" in proc.stderr.read().decode()
    started = _client(job, "start")
    assert started.returncode == 1
    assert started.stderr.strip() == (
        "[srtd nsys] start: nsys ready: a profiled process failed (agg_0-0: the profiled application exited with 3)"
    )


def test_a_participant_that_never_comes_up_times_the_client_out_naming_it(job: dict[str, str]) -> None:
    (Path(job["SRT_NSYS_CONTROL_DIR"]) / "steps" / "decode_0.json").write_text('{"ranks": 2}\n')
    began = time.monotonic()
    started = _client({**job, "SRT_NSYS_CONTROL_TIMEOUT": "1"}, "start")
    assert started.returncode == 1
    assert started.stderr.strip() == "[srtd nsys] start: nsys ready: no answer after 1 s from decode_0-0, decode_0-1"
    assert time.monotonic() - began < 15


def test_without_a_control_directory_the_hooks_do_nothing(job: dict[str, str]) -> None:
    env = {k: v for k, v in job.items() if k != "SRT_NSYS_CONTROL_DIR"}
    assert _client(env, "start").returncode == 0
    assert _calls(job) == []


def test_a_restarted_process_forgets_its_failure_and_does_not_replay_old_windows(job: dict[str, str]) -> None:
    first = _wrap(job, app="import sys, time; time.sleep(1.5); sys.exit(3)")
    assert first.wait(timeout=30) == 1
    control = Path(job["SRT_NSYS_CONTROL_DIR"])
    assert (control / "failed" / "agg_0-0.json").is_file()
    # a window opened and closed by an earlier client, before this attempt
    (control / "requests").mkdir(exist_ok=True)
    (control / "requests" / "000001.json").write_text('{"action": "start", "window": 1}\n')
    (control / "requests" / "000002.json").write_text('{"action": "stop", "window": 1}\n')
    (control / "client.json").write_text('{"sequence": 2, "window": 1, "active": false}\n')
    again = _wrap(job)
    ready = control / "ready" / "agg_0-0.json"
    deadline = time.monotonic() + 20
    while (control / "failed" / "agg_0-0.json").exists() or not ready.exists():
        assert time.monotonic() < deadline, "the restarted wrapper never came up"
        time.sleep(0.05)
    try:
        assert _client(job, "start").returncode == 0
        assert _client(job, "stop").returncode == 0
    finally:
        assert _stop_wrapper(again) == 0
    assert not (control / "failed" / "agg_0-0.json").exists()
    starts = [c for c in _calls(job) if c[0] == "start"]
    assert len(starts) == 1
    assert starts[0][-3].endswith("agg_0_profile_gpu0_window002")


def test_a_failed_request_fails_the_client_but_the_application_keeps_serving(job: dict[str, str]) -> None:
    control = Path(job["SRT_NSYS_CONTROL_DIR"])
    proc = _wrap(job)
    try:
        # the client believes a window is open (this process restarted inside it): stop cannot be honoured
        (control / "client.json").write_text('{"sequence": 0, "window": 1, "active": true}\n')
        stopped = _client(job, "stop")
        assert stopped.returncode == 1
        assert stopped.stderr.strip() == (
            "[srtd nsys] stop: nsys stop: a profiled process failed (agg_0-0: stop without an open window)"
        )
        time.sleep(0.5)
        assert proc.poll() is None  # the wrapper and its application are still up
        assert [c[0] for c in _calls(job)] == ["launch"]
    finally:
        assert _stop_wrapper(proc) == 1  # its capture failed: so does its exit code
    assert json.loads((control / "failed" / "agg_0-0.json").read_text()) == {"error": "stop without an open window"}
