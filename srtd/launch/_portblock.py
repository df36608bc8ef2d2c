"""A free block of ports for a local job: the first port offset nothing on this machine holds.

Two local jobs at once must not listen on the same ports.  `claim_port_block` tries the
offsets 0, 10, 20, ... (`PORT_OFFSET_STEP`) and takes the first whose ports are
disjoint from every live srtd job's claim and all bindable now.  A claim is a file
`<runtime dir>/ports/<pid>-<random>.json` listing the job's ports, flock-ed by its srtd for the
job's life: the kernel drops the lock when that process ends, however it ends, so a
claim whose lock can be taken is stale and is removed.  One lock file serialises the
choice, so two jobs started in the same instant cannot both pick offset 0.  Programs
that are not srtd are seen by the bind test only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from srtd.errors import LaunchError, PlanError, RecipeError
from srtd.runtime import private_dir, runtime_dir
from srtd.unit import Plan

PORT_OFFSET_STEP = 10
MAX_TRIES = 200


def plan_ports(plan: Plan) -> set[int]:
    return {p for unit in plan.units for p in unit.ports.values() if p > 0}


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _live_claims(directory: Path) -> set[int]:
    """The ports of every srtd job on this machine that still holds its claim."""
    held: set[int] = set()
    for path in directory.glob("*.json"):
        try:
            with path.open("r", encoding="utf-8") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held |= {int(p) for p in json.load(f)}
                    continue
                path.unlink(missing_ok=True)  # its srtd is gone
        except (OSError, ValueError, TypeError):
            continue  # vanished or unreadable: not a claim we can honour
    return held


@contextmanager
def _choosing(directory: Path) -> Iterator[None]:
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class PortClaim:
    """A job's hold on its block; `release` (or the process ending) frees it."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle = handle

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        self._handle.close()


def claim_port_block(build: Callable[[int], Plan], directory: Path | None = None) -> tuple[Plan, PortClaim]:
    """The plan at the first free offset, and the claim that keeps it this job's."""
    first = build(0)  # a mistake in the recipe surfaces here, as without a port block
    purpose = "keep port claims there"
    base = directory or private_dir(runtime_dir(), LaunchError, purpose)  # a shared one is refused whole
    where = private_dir(base / "ports", LaunchError, purpose)
    with _choosing(where):
        taken = _live_claims(where)
        for attempt in range(MAX_TRIES):
            try:
                plan = build(attempt * PORT_OFFSET_STEP) if attempt else first
            except (PlanError, RecipeError):
                break  # past the last port
            ports = plan_ports(plan)
            if ports & taken or not all(_bindable(p) for p in sorted(ports)):
                continue
            fd, name = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".json", dir=where)
            path, handle = Path(name), os.fdopen(fd, "w", encoding="utf-8")
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
            handle.write(json.dumps(sorted(ports)))
            handle.flush()
            return plan, PortClaim(path, handle)
    raise LaunchError(
        "no free block of ports on this machine: every port offset up to the last port is held; "
        "give one with --port-offset, or stop a job"
    )
