"""Carving the allocation: which node does what.

The order is srt-slurm's, so a recipe lands on the same nodes under both tools:
reserved (dedicated) nodes first, then the engine roles' nodes in role order
(prefill, decode, agg), then each pool in `services:` order.  With
`benchmark.colocate_with_frontend` (the default) every dedicated role shares one
reserved node: the last node when the benchmark client is among them (the first
node runs the batch script unsandboxed, so a client is kept off it), otherwise
the first.  Without colocation, infra and frontend take nodes from the front and
the client takes the last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import field
from functools import cached_property

from srtd._value import value_class
from srtd.errors import PlanError

ROLE_ORDER = ("prefill", "decode", "agg")


@value_class
class NodeNeeds:
    """How many nodes of each kind a recipe asks for."""

    roles: dict[str, int]  # engine role -> nodes it owns (0 for colocated decode)
    pools: tuple[tuple[str, int], ...] = ()  # (owner service, nodes), in services order
    dedicated: frozenset[str] = frozenset()  # subset of {"infra", "frontend", "client"}
    colocate_dedicated: bool = True
    colocated_decode: bool = False

    @property
    def reserved(self) -> int:
        if not self.dedicated:
            return 0
        return 1 if self.colocate_dedicated else len(self.dedicated)

    @property
    def engine(self) -> int:
        return sum(self.roles.values())

    def breakdown(self) -> str:
        """`agg 2, pool etcd 1, dedicated 1`: where the total comes from."""
        return _breakdown(self)

    @property
    def total(self) -> int:
        # A job with neither roles nor pools still has a head node for its services.
        return max(self.reserved + self.engine + sum(n for _, n in self.pools), 1)


@value_class
class NodeMap:
    """Every node's job."""

    allocation: tuple[str, ...]
    """The job's nodes, in Slurm's order."""
    head: str
    """The frontend's node, where head-placed services run too."""
    infra: str
    """Where etcd and NATS run."""
    benchmark: str
    """The benchmark client's node."""
    reserved: tuple[str, ...] = ()
    """Nodes kept for dedicated roles (infra, frontend, client): no worker lands there."""
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Engine role -> its nodes (a colocated decode gets prefill's)."""
    pools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Service pool -> the nodes it owns."""
    unused: tuple[str, ...] = ()
    """Allocated nodes nothing was placed on."""
    spares: tuple[str, ...] = ()
    """The allocation's last nodes, held back to replace a failing or lost one (docs/nodes.md)."""

    @cached_property  # asked once per planned unit: a 1000-worker plan must not rebuild it 1000 times
    def workers(self) -> tuple[str, ...]:
        """Engine worker nodes, in allocation order, each once."""
        return _dedup(n for role in ROLE_ORDER for n in self.roles.get(role, ()))

    @cached_property
    def compute(self) -> tuple[str, ...]:
        """Worker nodes, then every pool's."""
        return _dedup([*self.workers, *(n for nodes in self.pools.values() for n in nodes)])

    @property
    def everything(self) -> tuple[str, ...]:
        """Every node doing work: head, infra, benchmark client, reserved, workers, pools."""
        return _dedup([self.head, self.infra, self.benchmark, *self.reserved, *self.compute])

    @property
    def per_node_services(self) -> tuple[str, ...]:
        """Where a service placed on `all` runs: every node doing work except a node reserved
        for the discovery plane alone (etcd, NATS), as srtctl places its per-node exporters."""
        infra_only = self.infra in self.reserved and self.infra not in (self.head, self.benchmark, *self.compute)
        return tuple(n for n in self.everything if not (infra_only and n == self.infra))

    def as_dict(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {"head": (self.head,), "infra": (self.infra,)}
        out["benchmark"] = (self.benchmark,)
        if self.reserved:
            out["reserved"] = self.reserved
        for role in ROLE_ORDER:
            if role in self.roles:
                out[role] = self.roles[role]
        for name, nodes in self.pools.items():
            out[f"pool:{name}"] = nodes
        if self.unused:
            out["unused"] = self.unused
        return out


def _dedup(nodes: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(nodes))


def synthesize(count: int) -> tuple[str, ...]:
    """Node names for a plan made without an allocation: node1..nodeN."""
    return tuple(f"node{i}" for i in range(1, count + 1))


def carve(needs: NodeNeeds, allocation: Sequence[str] | None, spares: int = 0) -> NodeMap:
    """Every node's job; the last `spares` nodes of the allocation are held back, nothing placed on them."""
    nodes = list(allocation) if allocation is not None else list(synthesize(needs.total + spares))
    if len(set(nodes)) != len(nodes):
        twice = next(node for i, node in enumerate(nodes) if node in nodes[:i])
        raise PlanError(f"the node list names {twice} twice")
    if len(nodes) < needs.total + spares:
        more = f" and {spares} spare" if spares else ""
        raise PlanError(
            f"the recipe needs {needs.total} nodes ({needs.breakdown()}){more}, allocation has {len(nodes)}"
        )
    all_nodes = tuple(nodes)
    held = tuple(nodes[len(nodes) - spares :]) if spares else ()
    nodes = nodes[: len(nodes) - spares]
    reserved: dict[str, str] = {}
    if needs.dedicated and needs.colocate_dedicated:
        node = nodes.pop() if "client" in needs.dedicated else nodes.pop(0)
        reserved = dict.fromkeys(needs.dedicated, node)
    else:
        for role in ("infra", "frontend"):
            if role in needs.dedicated:
                reserved[role] = nodes.pop(0)
        if "client" in needs.dedicated:
            reserved["client"] = nodes.pop()
    roles: dict[str, tuple[str, ...]] = {}
    cursor = 0
    for role in ROLE_ORDER:
        if role not in needs.roles:
            continue
        count = needs.roles[role]
        roles[role] = tuple(nodes[cursor : cursor + count])
        cursor += count
    if needs.colocated_decode and "decode" in roles:
        roles["decode"] = roles.get("prefill", ())
    pools: dict[str, tuple[str, ...]] = {}
    for name, count in needs.pools:
        pools[name] = tuple(nodes[cursor : cursor + count])
        cursor += count
    first_worker = next((n for role in ROLE_ORDER for n in roles.get(role, ())), None)
    first_pool = next((n for p in pools.values() for n in p), None)
    head = reserved.get("frontend") or first_worker or first_pool or (reserved and next(iter(reserved.values()))) or ""
    if not head:
        head = all_nodes[0]  # neither roles nor pools: the services run on the first node
    unused = tuple(n for n in nodes[cursor:] if n != head)
    return NodeMap(
        allocation=all_nodes,
        head=head,
        infra=reserved.get("infra", head),
        benchmark=reserved.get("client", head),
        reserved=_dedup(reserved.values()),
        roles=roles,
        pools=pools,
        unused=unused,
        spares=held,
    )


def _breakdown(needs: NodeNeeds) -> str:
    parts = [f"{role} {n}" for role, n in needs.roles.items() if n]
    parts += [f"pool {name} {n}" for name, n in needs.pools]
    if needs.reserved:
        parts.append(f"dedicated {needs.reserved}")
    return ", ".join(parts) or "none"
