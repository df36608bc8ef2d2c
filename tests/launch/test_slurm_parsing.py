"""What SlurmLauncher reads from Slurm's tools: durations, node records, srun's exit codes."""

from __future__ import annotations

import pytest

from srtd.launch import ExitStatus
from srtd.launch._slurm import parse_duration, parse_nodes
from srtd.launch._slurm_step import _status


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 45),
        ("1:05", 65),
        ("2:00:01", 7201),
        ("1-00:00:10", 86410),
        ("UNLIMITED", None),
        ("", None),
        ("1:x", None),
    ],
)
def test_slurm_durations(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


def test_scontrol_node_records() -> None:
    text = (
        "NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=127.0.0.2 NodeHostName=vm Version=22.05.8 State=IDLE\n"
        "NodeName=node2 Arch=x86_64 NodeAddr=127.0.0.3 NodeHostName=vm State=MIXED Comment=(null)\n"
    )
    nodes = parse_nodes(text)
    assert {n: (f["NodeAddr"], f["NodeHostName"]) for n, f in nodes.items()} == {
        "node1": ("127.0.0.2", "vm"),
        "node2": ("127.0.0.3", "vm"),
    }


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (0, ExitStatus(code=0)),
        (7, ExitStatus(code=7)),
        (137, ExitStatus(signal=9)),
        (143, ExitStatus(signal=15)),
        (255, ExitStatus(code=255)),
        (-9, ExitStatus(signal=9)),
    ],
)
def test_sruns_exit_code_mirrors_the_task(code: int, status: ExitStatus) -> None:
    assert _status(code) == status
