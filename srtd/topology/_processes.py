"""Processes: one per worker per node, with the ports it binds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from srtd._value import value_class
from srtd.topology._endpoints import Endpoint
from srtd.topology._ports import PortAllocator, PortKind


@value_class
class Process:
    """One worker process on one node (rank `node_rank` of its endpoint)."""

    endpoint: Endpoint
    node: str
    node_rank: int
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.node_rank == 0

    @property
    def gpus(self) -> tuple[int, ...]:
        return self.endpoint.gpus

    @property
    def visible_devices(self) -> str:
        return ",".join(str(g) for g in sorted(self.endpoint.gpus))


@value_class
class PortPlan:
    """Which kinds a worker process binds: on every process, on the leader only, once per endpoint."""

    every: Sequence[PortKind] = ()
    leader: Sequence[PortKind] = ()
    per_role: dict[str, Sequence[PortKind]] = field(default_factory=dict)  # role -> leader-only kinds
    sizes: dict[str, int] = field(default_factory=dict)  # kind -> ports per allocation (one per engine)


def processes_of(endpoint: Endpoint, ports: PortPlan, allocator: PortAllocator) -> list[Process]:
    out = []
    for rank, node in enumerate(endpoint.nodes):
        assigned: dict[str, int] = {}
        kinds = list(ports.every)
        if rank == 0:
            kinds += [*ports.leader, *ports.per_role.get(endpoint.role, ())]
        for kind in kinds:
            assigned[kind.name] = allocator.next(kind, node, ports.sizes.get(kind.name, 1))
        out.append(Process(endpoint, node, rank, assigned))
    return out
