"""The local port block: claims of live jobs are skipped, stale claims dropped, taken ports avoided."""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.errors import LaunchError
from srtd.launch import PORT_OFFSET_STEP, claim_port_block
from srtd.launch._portblock import plan_ports
from srtd.topology import job_port_offset
from srtd.unit import Plan
from tests.plan._util import plan

REPO = Path(__file__).resolve().parents[2]

BODY = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
"""


def build(offset: int) -> Plan:
    return plan(BODY, local=True, port_offset=offset)


def frontend_port(p: Plan) -> int:
    return p.unit("frontend_0").ports["http"]


def _quiet_build() -> Callable[[int], Plan]:
    """`build`, moved to a block that is free now with the next one, so that ports other
    tests on this machine hold (a toy router on 8000) cannot change what these tests see."""
    rng = random.Random()
    for _ in range(100):
        shift = rng.randrange(2000, 4000) * 10

        def shifted(offset: int, shift: int = shift) -> Plan:
            return build(offset + shift)

        if all(_bindable(p) for offset in (0, PORT_OFFSET_STEP) for p in plan_ports(shifted(offset))):
            return shifted
    raise AssertionError("no quiet block of ports on this machine")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


HOLD = (
    "import socket, sys, time; s = socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); "
    "s.listen(); print('up', flush=True); time.sleep(120)"
)


def test_first_block_is_offset_0_and_a_second_job_gets_the_next(tmp_path: Path) -> None:
    quiet = _quiet_build()
    base = quiet(0).port_offset
    assert base is not None
    first, claim = claim_port_block(quiet, tmp_path)
    second, other = claim_port_block(quiet, tmp_path)  # another open file: the first claim's lock holds
    assert (first.port_offset, second.port_offset) == (base, base + PORT_OFFSET_STEP)
    assert (frontend_port(first), frontend_port(second)) == (8000 + base, 8010 + base)
    claim.release()
    third, last = claim_port_block(quiet, tmp_path)
    assert third.port_offset == base  # the released block is free again
    other.release()
    last.release()
    assert list((tmp_path / "ports").glob("*.json")) == []


def test_a_stale_claim_is_removed(tmp_path: Path) -> None:
    quiet = _quiet_build()
    (tmp_path / "ports").mkdir(mode=0o700)
    stale = tmp_path / "ports" / "99999999.json"
    stale.write_text(json.dumps([frontend_port(quiet(0))]))  # nobody holds its lock: its srtd is gone
    chosen, claim = claim_port_block(quiet, tmp_path)
    assert chosen.port_offset == quiet(0).port_offset
    assert claim.moved is None
    assert not stale.exists()
    claim.release()


def test_no_free_block_is_a_launch_error(tmp_path: Path) -> None:
    (tmp_path / "ports").mkdir(mode=0o700)
    held = tmp_path / "ports" / "1.json"
    held.write_text(json.dumps(list(range(1024, 65536))))
    with held.open() as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        with pytest.raises(LaunchError, match="no free block of ports on this machine"):
            claim_port_block(build, tmp_path)


@pytest.mark.parametrize(
    ("given", "setting", "job", "expected"),
    [
        (None, None, "1234", None),
        (None, 30, "1234", 30),
        (7, 30, "1234", 7),
        (None, "auto", "1234", 340),
        (None, "auto", "99", 990),
        (None, "auto", "local", 0),
    ],
)
def test_job_port_offset(given: int | None, setting: int | str | None, job: str, expected: int | None) -> None:
    assert job_port_offset(given, setting, job) == expected


def test_cluster_setting_accepts_a_number_or_auto() -> None:
    assert Cluster(port_offset="auto").port_offset == "auto"
    assert Cluster(port_offset=20).port_offset == 20
    with pytest.raises(ValueError, match="port_offset"):
        Cluster(port_offset=-1)


# ---------------------------------------------------------------- why the block moved


def test_a_port_another_program_holds_is_named_with_its_process(tmp_path: Path) -> None:
    quiet = _quiet_build()
    port = frontend_port(quiet(0))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "up\n"
        chosen, claim = claim_port_block(quiet, tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert chosen.port_offset == frontend_port(chosen) - 8000 == port - 8000 + PORT_OFFSET_STEP
    command = f"{sys.executable} -c {HOLD} {port}"
    command = command if len(command) <= 80 else command[:77] + "..."
    assert claim.moved == f"port {port} is held by pid {holder.pid} ({command}), not an srtd job of yours"
    claim.release()


def test_a_port_a_running_srtd_job_holds_is_named_with_that_job(tmp_path: Path) -> None:
    quiet = _quiet_build()
    first, mine = claim_port_block(quiet, tmp_path)
    assert mine.moved is None  # the first block: nothing to explain
    second, other = claim_port_block(quiet, tmp_path)
    lowest = min(plan_ports(first))
    assert second.port_offset == first.port_offset + PORT_OFFSET_STEP  # type: ignore[operator]
    assert other.moved == f"port {lowest} is held by srtd job {first.job_id} (pid {os.getpid()})"
    mine.release()
    other.release()


def test_a_claim_of_an_older_srtd_is_still_honoured_and_named(tmp_path: Path) -> None:
    quiet = _quiet_build()
    (tmp_path / "ports").mkdir(mode=0o700)
    old = tmp_path / "ports" / "4242-abc.json"
    lowest = min(plan_ports(quiet(0)))
    old.write_text(json.dumps([lowest]))  # the bare list srtd wrote before job ids
    with old.open() as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        chosen, claim = claim_port_block(quiet, tmp_path)
    assert chosen.port_offset == quiet(PORT_OFFSET_STEP).port_offset
    assert claim.moved == f"port {lowest} is held by an srtd job (pid 4242)"
    claim.release()


def test_another_users_process_is_named_by_its_user(tmp_path: Path) -> None:
    """What a user who may not read the holder's descriptors learns: its owner."""
    python = shutil.which("python3", path="/usr/bin:/bin")  # the venv's may be under root's home
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root and a system python3, to look from another user's side")
    holders = REPO / "srtd" / "launch" / "_holders.py"  # the standard library only: runs as a file
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        look = f"import runpy; print(runpy.run_path({str(holders)!r})['port_holder']({port}))"
        seen = subprocess.run([python, "-I", "-c", look], user="nobody", capture_output=True, text=True, check=False)
    assert (seen.returncode, seen.stdout, seen.stderr) == (0, "a process of user root\n", "")
