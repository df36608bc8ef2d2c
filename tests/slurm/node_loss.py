"""Make a dev-cluster node "die" for real, and bring it back.

A lost node is its `slurmd -N nodeK`, the slurmstepd of every step of the job there and
those steps' tasks, all SIGKILLed at once (what a node that loses power leaves behind,
minus the TCP resets).  `mark_down` stands in for SlurmdTimeout expiring; `restore`
runs `scripts/slurm-dev-cluster up`, which restarts that slurmd and resumes nodes Slurm
drained.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from tests.slurm.conftest import CLUSTER_SCRIPT

SPOOL = Path("/var/spool/slurmd")


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def node_processes(node: str, job: str) -> dict[str, list[int]]:
    """The pids that make up `node` for `job`: its slurmd, its steps' slurmstepds, their tasks."""
    slurmd = int(Path(f"/run/slurmd-{node}.pid").read_text().strip())
    steps = {p.name.removeprefix(f"{node}_") for p in (SPOOL / node).glob(f"{node}_{job}.*")}
    stepds: list[int] = []
    tasks: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        cmd = _cmdline(pid)
        if cmd.startswith("slurmstepd:") and any(f"[{s}]" in cmd for s in steps):
            stepds.append(pid)
            continue
        env = _environ(pid)
        if env.get("SLURMD_NODENAME") == node and env.get("SLURM_JOB_ID") == job and not cmd.startswith("slurmstepd"):
            tasks.append(pid)
    return {"slurmd": [slurmd], "slurmstepd": stepds, "tasks": tasks}


def kill_node(node: str, job: str) -> dict[str, list[int]]:
    found = node_processes(node, job)
    for pids in found.values():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return found


def mark_down(node: str) -> None:
    """What slurmctld does itself once SlurmdTimeout (300 s) passes without word from `node`.

    A DOWN node leaves its jobs' completing steps: they end at once.  Without this the
    job waits in COMPLETING for Slurm to resend TERMINATE_JOB after the node returns,
    which takes from seconds to well over 240 s depending on where the purge cycle is.
    """
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=down", "reason=srtd test: node lost"],
        capture_output=True,
        check=True,
        timeout=30,
    )


def restore() -> None:
    subprocess.run([str(CLUSTER_SCRIPT), "up", "4"], capture_output=True, check=False, timeout=120)
