"""Port allocation: every listener a worker binds comes from one allocator.

A `PortKind` is a row: its base, its stride, and whether its counter runs per
node (listeners bound only on that node) or across the job (side channels that
peers address, which must never repeat).  The bases and strides are srt-slurm's,
so a plan's ports match what engines and dashboards expect.  In local mode every
node is this one machine, so per-node counters share one key and nothing
collides.
"""

from __future__ import annotations

from srtd._value import value_class
from srtd.errors import PlanError

PORT_LIMIT = 65536


@value_class
class PortKind:
    name: str
    base: int
    stride: int = 1
    per_node: bool = False
    span: int = 1  # consecutive ports one allocation holds (kvbm: pub + ack)


# name -> row.  Engines refer to kinds by these objects, never by arithmetic on
# another port.
SYS = PortKind("sys", 7500)
HTTP = PortKind("http", 6100, stride=32, per_node=True)
BOOTSTRAP = PortKind("bootstrap", 7200, per_node=True)
KV_EVENTS = PortKind("kv_events", 5200)
NIXL = PortKind("nixl", 5400)
DP_RPC = PortKind("dp_rpc", 8400, per_node=True)
KVBM_ZMQ = PortKind("kvbm_zmq", 5600, stride=2, span=2)
SIDECAR_GRPC = PortKind("sidecar_grpc", 50051)
NCCL = PortKind("nccl", 17500)
DIST_INIT = PortKind("dist_init", 8300, per_node=True)
VLLM_SCAN = PortKind("vllm_scan", 20000, stride=50, span=50)
MORIIO_HANDSHAKE = PortKind("moriio_handshake", 26000)
MORIIO_NOTIFY = PortKind("moriio_notify", 27000)
TRTLLM_DIST_INIT = PortKind("trtllm_dist_init", 29500)
GRPC = PortKind("grpc", 10000, per_node=True)  # a worker that serves gRPC instead of HTTP
LOAD_PUBLISH = PortKind("load_publish", 18000)  # SGLang's queued-work load publisher (`auto`)
KV_REPLAY = PortKind("kv_replay", 19000)  # SGLang's KV-event replay endpoint (`auto`)

PORT_KINDS: dict[str, PortKind] = {
    k.name: k
    for k in (
        SYS,
        HTTP,
        BOOTSTRAP,
        KV_EVENTS,
        NIXL,
        DP_RPC,
        KVBM_ZMQ,
        SIDECAR_GRPC,
        NCCL,
        DIST_INIT,
        VLLM_SCAN,
        MORIIO_HANDSHAKE,
        MORIIO_NOTIFY,
        TRTLLM_DIST_INIT,
        GRPC,
        LOAD_PUBLISH,
        KV_REPLAY,
    )
}

# Fixed ports of the job's well-known listeners.
FRONTEND_PUBLIC_PORT = 8000
FRONTEND_INTERNAL_PORT = 8180
ROUTER_METRICS_PORT = 29000


AUTO_OFFSET_JOBS = 100  # `port_offset: auto`: jobs whose ids differ by this share a block
AUTO_OFFSET_STEP = 10


def job_port_offset(given: int | None, setting: int | str | None, job_id: str) -> int | None:
    """The job's port offset: `--port-offset`, else the cluster setting; None: not pinned.

    `auto` is `(job id % 100) * 10`, a function of the job id alone, so `srtd plan` shows
    what `srtd run` will use; a job id that is not a number (planned before submission)
    gets 0.
    """
    if given is not None:
        return given
    if setting == "auto":
        return (int(job_id) % AUTO_OFFSET_JOBS) * AUTO_OFFSET_STEP if job_id.isdigit() else 0
    if isinstance(setting, int):
        return setting
    return None


class PortAllocator:
    """Hands out ports per kind; one allocator per plan."""

    def __init__(self, *, local: bool = False, bases: dict[str, int] | None = None, offset: int = 0) -> None:
        self.local = local
        self.offset = offset  # the job's port offset, added to every base
        self._bases = dict(bases or {})
        self._next: dict[tuple[str, str | None], int] = {}

    def next(self, kind: PortKind, node: str | None = None, size: int = 1) -> int:
        """The first port of a block of `size` allocations of `kind` (on `node` if per node)."""
        if kind.per_node and node is None:
            raise PlanError(f"port kind {kind.name} is allocated per node, but no node was given")
        key = (kind.name, node if kind.per_node and not self.local else None)
        ordinal = self._next.get(key, 0)
        self._next[key] = ordinal + size
        port = self._bases.get(kind.name, kind.base) + self.offset + ordinal * kind.stride
        last = port + (size - 1) * kind.stride + kind.span - 1
        if last >= PORT_LIMIT:
            raise PlanError(f"port kind {kind.name} ran out of ports (next would be {last})")
        return port
