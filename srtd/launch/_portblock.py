"""A free block of ports for a local job: the first port offset nothing on this machine holds.

Two local jobs at once must not listen on the same ports.  `claim_port_block` tries the
offsets 0, 10, 20, ... (`PORT_OFFSET_STEP`) and takes the first whose ports are
disjoint from every live srtd job's claim and all bindable now.  A claim is a file
`<runtime dir>/ports/<pid>-<random>.json` listing the job's ports, flock-ed by its srtd for the
job's life: the kernel drops the lock when that process ends, however it ends, so a
claim whose lock can be taken is stale and is removed.  One lock file serialises the
choice, so two jobs started in the same instant cannot both pick offset 0.  Programs
that are not srtd are seen by the bind test only.

When the block moves, the claim says why (`PortClaim.moved`): for each block passed
over, its first port that is held and by whom, the srtd job whose claim lists it, or
the process `/proc` shows listening on it (`_holders`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from srtd.errors import LaunchError, PlanError, RecipeError
from srtd.launch._holders import bind_errno, port_holder
from srtd.runtime import private_dir, runtime_dir
from srtd.unit import Plan

PORT_OFFSET_STEP = 10
MAX_TRIES = 200


def plan_ports(plan: Plan) -> set[int]:
    return {p for unit in plan.units for p in unit.ports.values() if p > 0}


def _claim_holder(path: Path, claim: Any) -> tuple[list[int], str]:
    """A claim's ports and its job in words.  Claims of srtd before job ids were written
    are a bare list of ports; the file name starts with the pid either way."""
    pid = path.name.split("-", 1)[0]
    if isinstance(claim, dict):
        return [int(p) for p in claim["ports"]], f"srtd job {claim['job_id']} (pid {pid})"
    return [int(p) for p in claim], f"an srtd job (pid {pid})"  # not a list: TypeError


def _live_claims(directory: Path) -> dict[int, str]:
    """The ports of every srtd job on this machine that still holds its claim, and that job."""
    held: dict[int, str] = {}
    for path in directory.glob("*.json"):
        try:
            with path.open("r", encoding="utf-8") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    ports, job = _claim_holder(path, json.load(f))
                    held.update(dict.fromkeys(ports, job))
                    continue
                path.unlink(missing_ok=True)  # its srtd is gone
        except (OSError, ValueError, TypeError, KeyError):
            continue  # vanished or unreadable: not a claim we can honour
    return held


def _first_held(ports: set[int], taken: dict[int, str]) -> tuple[int, str | None] | None:
    """The block's first port another srtd job claims (with that job), else its first port
    that cannot be bound (with None); None when the block is free."""
    for port in sorted(ports):
        if port in taken:
            return port, taken[port]
    for port in sorted(ports):
        if bind_errno(port) is not None:
            return port, None
    return None


def _why_held(port: int, job: str | None) -> str:
    """One held port in words: its srtd job, or what `/proc` shows listening on it."""
    if job is not None:
        return f"port {port} is held by {job}"
    refused = bind_errno(port)
    if refused == errno.EACCES:
        return f"port {port} needs privileges to bind"
    if refused is None:  # let go since the block was passed over
        return f"port {port} was held by a process that is not an srtd job of yours"
    return f"port {port} is held by {port_holder(port)}, not an srtd job of yours"


def _moved(skipped: list[tuple[int, str | None]]) -> str | None:
    """`PortClaim.moved`: the blocks passed over, each by its first held port (the first
    three named: finding a port's process reads /proc, and one line is enough)."""
    if not skipped:
        return None
    shown = "; ".join(_why_held(port, job) for port, job in skipped[:3])
    return shown + (f"; and {len(skipped) - 3} more blocks held" if len(skipped) > 3 else "")


@contextmanager
def _choosing(directory: Path) -> Iterator[None]:
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class PortClaim:
    """A job's hold on its block; `release` (or the process ending) frees it.  `moved`:
    why the block is not the first one (None when it is)."""

    def __init__(self, path: Path, handle: IO[str], moved: str | None = None) -> None:
        self.path = path
        self._handle = handle
        self.moved = moved

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        self._handle.close()

    def hand_over(self) -> tuple[str, int]:
        """(path, descriptor) for the process `srtd run` execs: the descriptor, and the lock on
        it, live through the exec (`taken_over` makes it private again there)."""
        self._handle.flush()
        fd = self._handle.fileno()
        os.set_inheritable(fd, True)
        return str(self.path), fd

    @classmethod
    def taken_over(cls, path: str, fd: int) -> PortClaim:
        os.set_inheritable(fd, False)  # the units must not hold the claim
        return cls(Path(path), os.fdopen(fd, "w", encoding="utf-8"))


def claim_port_block(build: Callable[[int], Plan], directory: Path | None = None) -> tuple[Plan, PortClaim]:
    """The plan at the first free offset, and the claim that keeps it this job's."""
    first = build(0)  # a mistake in the recipe surfaces here, as without a port block
    purpose = "keep port claims there"
    base = directory or private_dir(runtime_dir(), LaunchError, purpose)  # a shared one is refused whole
    where = private_dir(base / "ports", LaunchError, purpose)
    with _choosing(where):
        taken = _live_claims(where)
        skipped: list[tuple[int, str | None]] = []
        for attempt in range(MAX_TRIES):
            offset = attempt * PORT_OFFSET_STEP
            try:
                plan = build(offset) if attempt else first
            except (PlanError, RecipeError):
                break  # past the last port
            ports = plan_ports(plan)
            held = _first_held(ports, taken)
            if held is not None:
                skipped.append(held)
                continue
            fd, name = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".json", dir=where)
            path, handle = Path(name), os.fdopen(fd, "w", encoding="utf-8")
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
            handle.write(json.dumps({"ports": sorted(ports), "job_id": plan.job_id}))
            handle.flush()
            return plan, PortClaim(path, handle, _moved(skipped))
    raise LaunchError(
        "no free block of ports on this machine: every port offset up to the last port is held; "
        "give one with --port-offset, or stop a job"
    )
