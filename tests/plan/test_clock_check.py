"""The clock check before a job that samples power: one `clock_sync_<node>` host step per node
of the job, the first tier, critical only under `telemetry.required` (srtd/plan/_clock.py).

The check itself is run for real with bash on this machine: its own time sources first (the
kernel's word is what this machine has), then stand-ins for a time daemon's client on PATH.
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
from pathlib import Path

import pytest

from srtd.plan._clock import CHECK
from srtd.unit import Plan, UnitKind
from tests.plan._util import after, names, plan
from tests.plan.test_telemetry import AGG, AMD, HEAD_TACH

NODES = ["n1", "n2", "n3"]
CLOCKS = ["clock_sync_n1", "clock_sync_n2"]  # n1: head, infra and a worker; n2: the other worker


def power_plan(extra: str = "", **kwargs: object) -> Plan:
    body = AGG + AMD.replace("  enabled: true\n", f"  enabled: true\n{extra}")
    return plan(body, head=HEAD_TACH, nodes=NODES, **kwargs)


def test_each_node_of_the_job_checks_its_clock_before_anything_launches() -> None:
    p = power_plan()
    assert names(p)[:2] == CLOCKS  # the spare node n3 runs nothing, so it checks nothing
    assert p.phases[0] == "host_setup"
    for name, node in zip(CLOCKS, ("n1", "n2"), strict=True):
        unit = p.unit(name)
        assert (unit.kind, unit.nodes, unit.argv) == (UnitKind.HOST, (node,), ("bash", "-c", CHECK))
        assert unit.container is None  # the bare host: its time sources, not a container's
        assert (unit.run_timeout, unit.critical, unit.tier) == (30.0, False, 0)
        assert unit.log == f"{name}.out"  # at the top of logs/, beside the host hooks
        assert unit.env["SRTD_LOG_DIR"] == p.log_dir  # the host's path: no container maps /logs here
    roots = [u.name for u in p.units if u.kind is not UnitKind.HOST and all(e.unit in CLOCKS for e in u.after)]
    assert roots
    for root in roots:  # everything else waits for each check to have ended, passed or not
        assert after(p, root) == [(c, "ended") for c in CLOCKS]


def test_required_power_makes_a_failed_check_fail_the_job() -> None:
    p = power_plan("  required: true\n")
    assert [p.unit(c).critical for c in CLOCKS] == [True, True]


def test_no_power_sampling_or_one_host_no_clock_check() -> None:
    assert not [n for n in names(plan(AGG, head=HEAD_TACH, nodes=NODES)) if n.startswith("clock_sync")]
    local = power_plan(local=True)
    assert not [n for n in names(local) if n.startswith("clock_sync")]
    assert "host_setup" not in local.phases


def test_the_check_sits_beside_the_recipes_host_hooks() -> None:
    p = plan(AGG + AMD + "host_setup: {commands: [lock clocks]}\n", head=HEAD_TACH, nodes=NODES)
    first = names(p)[:4]
    assert sorted(first) == sorted(["host_setup_n1", "host_setup_n2", *CLOCKS])
    assert {p.unit(n).tier for n in first} == {0}


# ------------------------------------------------------------------ the check, run for real


def kernel_synchronised() -> bool:
    buf = ctypes.create_string_buffer(512)
    state = ctypes.CDLL(None).adjtimex(buf)
    return not (state == 5 or struct.unpack_from("i", buf, 40)[0] & 0x40)


def run_check(tmp_path: Path, **tools: str) -> subprocess.CompletedProcess[str]:
    """The check with PATH = stand-ins (name -> script) + the system's own directories."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-c", CHECK], check=False, env={**os.environ, "PATH": path}, capture_output=True, text=True
    )


DOWN = "echo 'no daemon' >&2; exit 1\n"  # a time tool whose daemon is not running


def test_the_kernels_word_decides_when_no_daemon_answers(tmp_path: Path) -> None:
    done = run_check(tmp_path, timedatectl=DOWN, chronyc=DOWN, ntpq=DOWN)
    node = os.uname().nodename
    if kernel_synchronised():
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{node}: clock synchronised (kernel: state ")
    else:  # this machine: no NTP, the kernel says unsynchronised; every source's answer is shown
        assert done.returncode == 1
        lines = done.stderr.splitlines()
        assert lines[0] == f"{node}: clock not synchronised"
        assert lines[1:4] == ["  timedatectl: no daemon", "  chronyc: no daemon", "  ntpq: no daemon"]
        assert lines[4].startswith("  kernel: state ")
        assert "status 0x" in lines[4]


@pytest.mark.parametrize(
    ("tools", "source", "shown"),
    [
        ({"timedatectl": "echo yes\n"}, "timedatectl", []),
        (
            {
                "timedatectl": "echo no\n",
                "chronyc": "echo 'Reference ID    : 0A000001 (ntp1)'; echo 'Leap status     : Normal'\n",
            },
            "chronyc",
            ["Reference ID    : 0A000001 (ntp1)"],
        ),
        (
            {
                "timedatectl": DOWN,
                "chronyc": "echo 'Leap status     : Not synchronised'\n",
                "ntpq": "echo '     remote'; echo '*10.0.0.1  .GPS.  1 u'\n",
            },
            "ntpq",
            ["*10.0.0.1  .GPS.  1 u"],
        ),
    ],
)
def test_the_first_source_that_says_synchronised_passes(
    tmp_path: Path, tools: dict[str, str], source: str, shown: list[str]
) -> None:
    done = run_check(tmp_path, **tools)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{os.uname().nodename}: clock synchronised ({source})", *shown]
