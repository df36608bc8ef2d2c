"""Is each node of the allocation still there?  A TCP connect to its slurmd.

Slurm itself tells a job nothing about a node that died until SlurmdTimeout (300 s by
default): the srun client of a step there stays silent and alive, squeue lists the
step as running (docs/failures.md).  So the Slurm launcher checks on its own: every
`interval` seconds it connects to every node's slurmd (NodeAddr:Port, from `scontrol
show node`) and closes at once.  A node none of whose connects succeeded for
`lost_after` seconds is lost, once and for good (a node that comes back is not trusted
with the job again).  Detection bound: `lost_after + interval + CONNECT_TIMEOUT`.

A unit being stopped must not wait that long for its node's verdict (the job's end is
due within KillWait + 5 s of a stop request): `hurry(node)` checks that node at once and,
while it does not answer, every `HURRY_INTERVAL` s, and gives it up after `HURRY_LOST` s
without an answer.  A node that answers is left to the regular check.

The price of the check: slurmd logs an error line per connect that sends no message,
which is why the interval is a cluster setting (0 turns the check off).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import anyio

CONNECT_TIMEOUT = 2.0  # seconds a connect may take before it counts as unanswered
HURRY_LOST = 3.0  # seconds without an answer that give up the node of a unit being stopped
HURRY_INTERVAL = 1.0

OnLost = Callable[[str, str], None]


class NodePresence:
    """Checks `targets` (node -> (host, port)) and calls `on_lost(node, evidence)` once per lost node."""

    def __init__(
        self,
        targets: Mapping[str, tuple[str, int]],
        *,
        interval: float,
        lost_after: float,
        on_lost: OnLost,
        now: Callable[[], float] = anyio.current_time,
    ) -> None:
        self.targets = dict(targets)
        self.interval = interval
        self.lost_after = lost_after
        self.on_lost = on_lost
        self.now = now
        self.lost: dict[str, str] = {}  # node -> the evidence it was declared lost on
        self._last_ok: dict[str, float] = {}
        self._last_error: dict[str, str] = {}
        self._hurried: set[str] = set()

    async def run(self) -> None:
        if self.interval <= 0 or not self.targets:
            return
        start = self.now()
        self._last_ok = dict.fromkeys(self.targets, start)
        while True:
            async with anyio.create_task_group() as tg:
                for node in self.targets:
                    if node not in self.lost:
                        tg.start_soon(self.check, node)
            await anyio.sleep(self.interval)

    async def check(self, node: str, lost_after: float | None = None) -> bool:
        """Connect once; True if the node answered.  Lost after `lost_after` s (default: the setting) of silence."""
        host, port = self.targets[node]
        error = await connect_error(host, port)
        now = self.now()
        if error is None:
            self._last_ok[node] = now
            return True
        self._last_error[node] = error
        quiet = now - self._last_ok.get(node, now)
        if quiet >= (self.lost_after if lost_after is None else lost_after) and node not in self.lost:
            evidence = f"slurmd at {host}:{port} has not answered for {quiet:.0f} s: {error}"
            self.lost[node] = evidence
            self.on_lost(node, evidence)
        return False

    async def hurry(self, node: str) -> None:
        """A unit on `node` is being stopped: decide about the node within `HURRY_LOST` s, not `lost_after`."""
        if self.interval <= 0 or node not in self.targets or node in self.lost or node in self._hurried:
            return
        self._hurried.add(node)
        try:
            while node not in self.lost and not await self.check(node, min(self.lost_after, HURRY_LOST)):
                await anyio.sleep(HURRY_INTERVAL)
        finally:
            self._hurried.discard(node)


async def connect_error(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None if a TCP connect to host:port succeeds within `timeout`, else what went wrong."""
    with anyio.move_on_after(timeout):
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError as e:
            cause = e.__cause__ if isinstance(e.__cause__, OSError) else e  # anyio wraps the last attempt's error
            return os.strerror(cause.errno) if cause.errno else str(cause)
        await stream.aclose()
        return None
    return f"no answer within {timeout:g} s"
