"""`srtd run recipes/features/liveness.yaml` as a user runs it: freeze a worker and the heartbeat service."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from tests.command import ctrl_c
from tests.e2e.test_local_run import REPO, srtd, wait_for
from tests.supervisor.helpers import assert_cancelled_by_sigint

LIVENESS = REPO / "recipes" / "features" / "liveness.yaml"

pytestmark = pytest.mark.slow


def test_a_frozen_worker_is_restarted_and_a_frozen_heartbeat_service_is_stopped(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = srtd("run", str(LIVENESS), "--log-dir", str(log_dir))
    frozen: list[int] = []
    try:
        seen = wait_for(
            log_dir,
            lambda es: (
                any(e.unit is None and e.state == "running" for e in es)
                and any(e.unit == "service_heartbeat" and e.state == "ready" for e in es)
            ),
        )
        pids = {e.unit: e.pid for e in seen if e.state == "starting" and e.attempt == 0}
        for unit in ("agg_0_node1", "service_heartbeat"):
            pid = pids[unit]
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)
        seen = wait_for(
            log_dir,
            lambda es: (
                any(e.unit == "agg_0_node1" and e.state == "ready" and e.attempt == 1 for e in es)
                and any(e.unit == "service_heartbeat" and e.state == "failed" for e in es)
            ),
        )
        worker = [e for e in seen if e.unit == "agg_0_node1"]
        assert [(e.state, e.attempt) for e in worker] == [
            ("starting", 0),
            ("ready", 0),
            ("stopping", 0),
            ("exited", 0),
            ("backoff", 1),
            ("starting", 1),
            ("ready", 1),
        ]
        stopping = next(e for e in worker if e.state == "stopping")
        assert (stopping.reason or "").startswith("unhealthy: http http://127.0.0.1:")
        assert (stopping.reason or "").endswith(" failed 3 times (last: no answer within 1 s)")
        assert stopping.detail is not None
        assert stopping.detail["unhealthy"]["failures"] == 3
        exited = next(e for e in worker if e.state == "exited")
        # Woken by SIGCONT, the toy worker obeyed SIGTERM: it drained and exited 0.
        assert (exited.exit_code, exited.signal) == (0, None)
        assert exited.reason == f"stopped: {stopping.reason}"
        heartbeat = next(e for e in seen if e.unit == "service_heartbeat" and e.state == "failed")
        assert (heartbeat.reason or "").startswith("unhealthy: log /^beat$/ failed 2 times")
        untouched = [e.state for e in seen if e.unit == "agg_1_node1"]
        assert untouched == ["starting", "ready"]
        out = ctrl_c(proc)
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_cancelled_by_sigint(proc.returncode, out, log_dir)
