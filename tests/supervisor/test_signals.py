"""Signals to srtd itself, run as a real process (tests/programs/run_plan.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from srtd.events import Event
from srtd.supervisor import read_journal
from srtd.unit import HttpProbe, LogProbe, Readiness, TcpProbe
from tests.supervisor.helpers import RUN_PLAN, PlanMaker, assert_no_leftovers, check_journal, edge, free_port


def _journal(maker: PlanMaker) -> list[Event]:
    path = maker.log_dir / "events.jsonl"
    try:
        return read_journal(path)
    except FileNotFoundError:
        return []


def _startup_plan(maker: PlanMaker) -> None:
    etcd, fe = free_port(), free_port()
    maker.unit("etcd", "--listen", f"{etcd}:0.2", tier=2,
               readiness=Readiness(probe=TcpProbe(node="node0", port=etcd)))  # fmt: skip
    for name in ("w0", "w1"):
        maker.unit(name, "--say", "0.2:worker ready", "--term-delay", "0.1", after=[edge("etcd")],
                   readiness=Readiness(probe=LogProbe(pattern="worker ready")))  # fmt: skip
    maker.unit("fe", "--http", f"{fe}:0.1", after=[edge("w0"), edge("w1")],
               readiness=Readiness(probe=HttpProbe(node="node0", port=fe)))  # fmt: skip
    maker.unit("bench", "--exit", "0:5", after=[edge("fe")], terminal=True)


def _start(maker: PlanMaker, *flags: str) -> subprocess.Popen[bytes]:
    plan_file = maker.root / "plan.json"
    plan_file.write_text(maker.plan().dumps())
    out = open(maker.root / "srtd.out", "wb")  # noqa: SIM115
    return subprocess.Popen([sys.executable, str(RUN_PLAN), str(plan_file), *flags], stdout=out, stderr=out)


def _wait_for_events(maker: PlanMaker, count: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while len(_journal(maker)) < count:
        assert time.monotonic() < deadline, f"journal never reached {count} events"
        time.sleep(0.005)


# Moments of startup, counted in journal events: 1 = the job has just started, ~6 = etcd
# probing, ~10 = workers loading, ~14 = frontend probing, 16 = job running.
MOMENTS = [1, 2, 3, 4, 6, 8, 10, 12, 14, 16]


@pytest.mark.parametrize("moment", MOMENTS)
def test_sigterm_at_any_moment_of_startup_leaves_nothing_and_a_complete_journal(maker: PlanMaker, moment: int) -> None:
    _startup_plan(maker)
    srtd = _start(maker)
    try:
        _wait_for_events(maker, moment)
        os.kill(srtd.pid, signal.SIGTERM)
        code = srtd.wait(timeout=20)
    finally:
        if srtd.poll() is None:
            srtd.kill()
            srtd.wait()
    output = (maker.root / "srtd.out").read_text()
    assert code == 128 + signal.SIGTERM, output
    assert_no_leftovers(maker.token, wait=1.0)
    events = check_journal(maker.log_dir / "events.jsonl", [u.name for u in maker.units])
    assert events[-1].state == "cancelled"
    assert events[-1].reason == "received SIGTERM"
    assert events[-1].exit_code == 143
    assert "job cancelled" in output


def test_a_second_sigint_kills_everything_at_once(maker: PlanMaker) -> None:
    maker.unit("stubborn", "--ignore-term", terminate_timeout=60.0)
    maker.unit("bench", "--exit", "0:60", terminal=True, terminate_timeout=60.0)
    srtd = _start(maker)
    try:
        deadline = time.monotonic() + 15
        while not (maker.marks("stubborn") and maker.marks("bench")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(srtd.pid, signal.SIGINT)
        _wait_for_events(maker, len(_journal(maker)) + 2)  # job stopping, stubborn/bench stopping
        time.sleep(0.2)
        assert srtd.poll() is None  # waiting out the 60 s terminate timeout
        t0 = time.monotonic()
        os.kill(srtd.pid, signal.SIGINT)
        code = srtd.wait(timeout=10)
        assert time.monotonic() - t0 < 3.0
    finally:
        if srtd.poll() is None:
            srtd.kill()
            srtd.wait()
    assert code == 128 + signal.SIGINT
    assert_no_leftovers(maker.token, wait=1.0)
    events = check_journal(maker.log_dir / "events.jsonl", [u.name for u in maker.units])
    stubborn = [e for e in events if e.unit == "stubborn"][-1]
    assert stubborn.signal == signal.SIGKILL


def test_an_invalid_plan_exits_2_and_starts_nothing(maker: PlanMaker, tmp_path: Path) -> None:
    maker.unit("a", after=[edge("ghost")])
    srtd = _start(maker)
    assert srtd.wait(timeout=20) == 2
    assert "depends on unknown unit 'ghost'" in (maker.root / "srtd.out").read_text()
    assert maker.marks("a") == []
