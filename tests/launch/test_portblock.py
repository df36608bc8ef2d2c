"""The local port block: claims of live jobs are skipped, stale claims dropped, taken ports avoided."""

from __future__ import annotations

import fcntl
import json
import socket
from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.errors import LaunchError
from srtd.launch import claim_port_block
from srtd.topology import job_port_offset
from srtd.unit import Plan
from tests.plan._util import plan

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


def test_first_block_is_offset_0_and_a_second_job_gets_the_next(tmp_path: Path) -> None:
    first, claim = claim_port_block(build, tmp_path)
    second, other = claim_port_block(build, tmp_path)  # another open file: the first claim's lock holds
    assert (first.port_offset, second.port_offset) == (0, 10)
    assert (frontend_port(first), frontend_port(second)) == (8000, 8010)
    claim.release()
    third, last = claim_port_block(build, tmp_path)
    assert third.port_offset == 0  # the released block is free again
    other.release()
    last.release()
    assert list((tmp_path / "ports").glob("*.json")) == []


def test_a_stale_claim_is_removed(tmp_path: Path) -> None:
    (tmp_path / "ports").mkdir(mode=0o700)
    stale = tmp_path / "ports" / "99999999.json"
    stale.write_text(json.dumps([8000]))  # nobody holds its lock: its srtd is gone
    chosen, claim = claim_port_block(build, tmp_path)
    assert chosen.port_offset == 0
    assert not stale.exists()
    claim.release()


def test_a_port_another_program_holds_moves_the_block(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", frontend_port(build(0))))
        holder.listen()
        chosen, claim = claim_port_block(build, tmp_path)
    assert chosen.port_offset == 10
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
