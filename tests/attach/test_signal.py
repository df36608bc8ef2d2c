"""`srtd signal` on a real toy job: docs/attach.md's own example (`HUP` to the frontend)
leaves the job running, and a signal that ends a unit goes through its restart policy
with a journaled reason that says a person sent it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.attach.helpers import RESTART, JobProcess, srtd
from tests.supervisor.helpers import assert_no_leftovers, check_journal

pytestmark = pytest.mark.slow


def _log_has(path: Path, line: str) -> bool:
    return line in path.read_text().splitlines()


def test_the_documented_signals_reach_the_toys_and_a_fatal_one_follows_the_policy(
    tmp_path: Path, runtime: Path
) -> None:
    log_dir = tmp_path / "logs"
    workers = log_dir / "workers"
    job = JobProcess.of_toy(RESTART, tmp_path)
    try:
        job.socket()
        running = job.running()
        job_id = str(running[0].detail["job_id"])  # type: ignore[index]
        mark = len(job.events())
        # docs/attach.md: "send a signal (`HUP`, `SIGUSR1`, `10`)"
        for unit, sig, name in (
            ("frontend_0", "HUP", "SIGHUP"),
            ("frontend_0", "SIGUSR1", "SIGUSR1"),
            ("agg_0_node1", "10", "SIGUSR1"),
            ("agg_0_node1", "USR2", "SIGUSR2"),
        ):
            sent = srtd("signal", job_id, unit, sig)
            assert (sent.returncode, sent.stdout) == (0, f"sent {name} to {unit}\n"), sent.stderr
        expected = {
            workers / "node1_frontend_0.out": [
                "toy-router: received SIGHUP, going on: 2 of 2 workers healthy",
                "toy-router: received SIGUSR1, going on: 2 of 2 workers healthy",
            ],
            workers / "node1_agg_w0.out": [
                "toy-worker: received SIGUSR1, going on: 0 requests so far, 0 in flight",
                "toy-worker: received SIGUSR2, going on: 0 requests so far, 0 in flight",
            ],
        }
        for path, lines in expected.items():
            job.wait_for(lambda _, path=path, lines=lines: all(_log_has(path, line) for line in lines))

        # A signal that ends a worker: on-failure restarts it, and the reason names `srtd signal`.
        killed = srtd("signal", job_id, "agg_1_node1", "KILL")
        assert killed.returncode == 0, killed.stderr
        seen = job.wait_for(
            lambda es: any(e.unit == "agg_1_node1" and e.state == "ready" and e.attempt == 1 for e in es)
        )
        mine = [(e.unit, e.state, e.attempt, e.signal, e.reason) for e in seen[mark:]]
        assert mine == [
            ("agg_1_node1", "exited", 0, signal.SIGKILL, "was killed by SIGKILL (sent through srtd signal)"),
            (
                "agg_1_node1",
                "backoff",
                1,
                None,
                "restart 1 of 3 in 1 s: was killed by SIGKILL (sent through srtd signal)",
            ),
            ("agg_1_node1", "starting", 1, None, None),
            ("agg_1_node1", "ready", 1, None, None),
        ]
        stopped = srtd("stop", job_id, "--wait")
        assert stopped.returncode == 0, stopped.stderr
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
    finally:
        job.kill()
    events = check_journal(log_dir / "events.jsonl", [])
    assert events[-1].state == "cancelled"
    assert not [e for e in events if e.unit == "frontend_0" and e.state in ("exited", "failed")]
    assert_no_leftovers(str(log_dir))
