"""If srtd itself is SIGKILLed, nothing it started may outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.supervisor.helpers import RUN_PLAN, PlanMaker, assert_no_leftovers, leftover_processes


def _start_srtd(maker: PlanMaker, *flags: str) -> subprocess.Popen[bytes]:
    plan_file = maker.root / "plan.json"
    plan_file.write_text(maker.plan(hold=True).dumps())
    out = open(maker.root / "srtd.out", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, str(RUN_PLAN), str(plan_file), "--grace", "0.5", *flags], stdout=out, stderr=out
    )


def _wait_for(pred: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("flags", "grandchildren"),
    [
        pytest.param((), True, id="guardian+pdeathsig"),
        pytest.param(("--no-pdeathsig",), True, id="guardian-only"),
        pytest.param(("--no-guardian",), False, id="pdeathsig-only"),
    ],
)
def test_sigkill_to_srtd_leaves_no_process_behind(
    maker: PlanMaker, flags: tuple[str, ...], grandchildren: bool
) -> None:
    maker.unit("plain")
    maker.unit("stubborn", "--ignore-term")
    expected = 2
    if grandchildren:
        maker.unit("parent", "--spawn-child")
        expected += 2  # the unit and its grandchild
    srtd = _start_srtd(maker, *flags)
    try:
        _wait_for(lambda: len(leftover_processes(maker.token)) >= expected)
        os.kill(srtd.pid, signal.SIGKILL)
        srtd.wait()
        assert_no_leftovers(maker.token, wait=5.0)
    finally:
        if srtd.poll() is None:
            srtd.kill()
            srtd.wait()
