"""Workers on nodes and GPUs.

Each role's workers are placed on that role's nodes (colocated decode: on the
prefill nodes, after prefill's GPUs).  A worker with at least a node's worth of
GPUs takes whole nodes; smaller workers are packed onto a node at the next free
GPU offset, moving to the next node when one does not fit (or always, with
`resources.spread_workers`).
"""

from __future__ import annotations

from srtd._value import value_class
from srtd.errors import PlanError, Problem


@value_class
class Endpoint:
    """One logical worker: a role, an index, its nodes and the GPU indices it uses on each."""

    role: str
    index: int
    nodes: tuple[str, ...]
    gpus: tuple[int, ...]
    gpus_per_node: int

    @property
    def leader(self) -> str:
        return self.nodes[0]

    @property
    def partial(self) -> bool:
        """True when the worker uses part of one node: only then are its GPUs pinned."""
        return len(self.nodes) == 1 and len(self.gpus) < self.gpus_per_node

    @property
    def gpu_count(self) -> int:
        return len(self.gpus) * len(self.nodes)

    @property
    def label(self) -> str:
        return f"{self.role}_{self.index}"


@value_class(frozen=False)
class Cursor:
    node: int = 0
    offset: int = 0


def place_role(
    role: str,
    workers: int,
    gpus: int,
    nodes: tuple[str, ...],
    gpus_per_node: int,
    *,
    spread: bool = False,
    cursor: Cursor | None = None,
) -> tuple[list[Endpoint], Cursor]:
    """Endpoints of one role on its nodes, and where the packing stopped."""
    at = Cursor(cursor.node, cursor.offset) if cursor else Cursor()
    out: list[Endpoint] = []
    for index in range(workers):
        if gpus >= gpus_per_node:
            span = -(-gpus // gpus_per_node)
            if at.offset:
                at = Cursor(at.node + 1, 0)
            chosen = nodes[at.node : at.node + span]
            if len(chosen) < span:
                raise PlanError(_short(role, workers, gpus, len(nodes), gpus_per_node))
            out.append(Endpoint(role, index, tuple(chosen), tuple(range(gpus_per_node)), gpus_per_node))
            at = Cursor(at.node + span, 0)
            continue
        if at.offset + gpus > gpus_per_node or (spread and at.offset):
            at = Cursor(at.node + 1, 0)
        if at.node >= len(nodes):
            raise PlanError(_short(role, workers, gpus, len(nodes), gpus_per_node))
        out.append(Endpoint(role, index, (nodes[at.node],), tuple(range(at.offset, at.offset + gpus)), gpus_per_node))
        at = Cursor(at.node, at.offset + gpus)
    return out, at


def _short(role: str, workers: int, gpus: int, nodes: int, gpus_per_node: int) -> Problem:
    return Problem(
        f"{workers} worker(s) of {gpus} GPU(s) do not fit on {nodes} node(s) of {gpus_per_node} GPUs",
        path=f"roles.{role}.workers",
    )
