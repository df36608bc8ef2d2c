"""A service kind: the defaults and behaviour one `type:` of service brings.

Kinds are rows of a registry (`@register_service("etcd")`); the name is compared
here and nowhere else.  The launch path is shared by every kind: a kind only
answers questions (its command, its ports, its readiness, its environment).
"""

from __future__ import annotations

from typing import ClassVar

from srtd._registry import Registry, Row
from srtd._value import value_class
from srtd.context import PlanContext
from srtd.layout import Place
from srtd.recipe import ServiceConfig
from srtd.topology import Process
from srtd.unit import Readiness

# with_workers services (a store the workers attach to) outlive the workers like before_workers ones
PHASE_TIER = {"after_frontend": 0, "with_workers": 1, "before_workers": 1, "infra": 2}


@value_class
class Instance:
    """One launch of a service: a node, and for per-worker services the worker it attaches to."""

    unit_name: str
    node: str
    index: int
    node_id: int
    worker: Process | None = None


class ServiceKind(Row):
    """Defaults and behaviour of one service type.  Subclasses override what differs."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_start: ClassVar[str] = "after_frontend"
    default_critical: ClassVar[bool] = False
    default_placement: ClassVar[str] = "head"
    default_per: ClassVar[str] = "node"
    placements: ClassVar[frozenset[str] | None] = None  # allowed placement.node values; None: any
    supports_dedicated: ClassVar[bool] = False
    supports_external: ClassVar[bool] = False
    option_keys: ClassVar[frozenset[str]] = frozenset()
    needs_command: ClassVar[bool] = False
    shell: ClassVar[bool] = True  # False: shell-less image, env travels through srun --export
    inherits_discovery: ClassVar[bool] = True
    host_native: ClassVar[bool] = False  # runs on the bare host unless a container is declared
    log_place: ClassVar[Place] = Place.SERVICE  # where its instances' logs go (srtd/layout.py)
    container_fallback: ClassVar[str | None] = None
    terminate_timeout: ClassVar[float] = 30.0
    tier: ClassVar[int | None] = None
    fixed_ports: ClassVar[dict[str, int]] = {}  # listener name -> port ("port" option overrides "main")
    readiness_ports: ClassVar[tuple[str, ...]] = ()  # default readiness: TCP on these
    readiness_timeout: ClassVar[int] = 120
    waits_for: ClassVar[tuple[str, ...]] = ()  # kinds whose services must be ready first
    discovery_var: ClassVar[str | None] = None  # the variable that points others at this service
    discovery_format: ClassVar[str] = "{address}:{port}"
    # srtctl points every process at this plane on the infra node even when the job runs
    # none (etcd); matching it keeps a service that reads the variable launching the same.
    advertised_without_service: ClassVar[bool] = False
    # The KV-cache pool's parts (the Mooncake kinds), as attributes so that no rule compares their names.
    kv_master: ClassVar[bool] = False  # the pool's master: at most one per job, stores and donors find it
    needs_kv_master: ClassVar[bool] = False  # refused unless the job runs a master
    lends_to_pool: ClassVar[bool] = False  # lends memory to TRT-LLM's pool: needs a master with pool options
    borrows_master_image: ClassVar[bool] = False  # runs in the master's container unless it names its own

    # ------------------------------------------------------------------ answers

    def ports(self, svc: ServiceConfig, offset: int) -> dict[str, int]:
        """Every port one instance listens on: the kind's own moved by the job's port offset,
        a port the recipe writes in `options` as written."""
        ports = {name: port + offset for name, port in self.fixed_ports.items()}
        port = svc.options.get("port")
        if isinstance(port, int) and ports:
            ports[next(iter(ports))] = port
        return ports

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        """The argv before the recipe's `args`; a kind with a default command overrides this."""
        return list(svc.command or ())

    def preamble(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> str | None:
        return None

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        return {}

    def forced_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        return {}

    def readiness(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> Readiness | None:
        """The default probe when the recipe writes none."""
        from srtd.unit import TcpProbe

        ports = self.ports(svc, ctx.port_offset)
        names = [n for n in self.readiness_ports if n in ports]
        if not names:
            return None
        return Readiness(
            probe=TcpProbe(node=inst.node, port=ports[names[0]]),
            timeout_seconds=self.readiness_timeout,
            interval_seconds=2,
        )

    def discovery_value(self, address: str, svc: ServiceConfig, offset: int) -> str | None:
        if self.discovery_var is None:
            return None
        ports = self.ports(svc, offset)
        port = next(iter(ports.values()), 0)
        return self.discovery_format.format(address=address, port=port)

    def client_env(self, ctx: PlanContext, svc: ServiceConfig) -> dict[str, str]:
        """Variables the benchmark client gets because this service runs."""
        return {}

    def srun_options(self, ctx: PlanContext, svc: ServiceConfig) -> dict[str, str]:
        """srun options the kind needs (under the recipe's own)."""
        return {}

    def log_name(self, inst: Instance) -> str:
        """Its instance's log file name, without `.out`: the unit's name unless srtctl names it otherwise."""
        return inst.unit_name

    def stop_timeout(self, ctx: PlanContext, svc: ServiceConfig) -> float:
        """Seconds between SIGTERM and SIGKILL when the job stops."""
        return self.terminate_timeout

    def skip_reason(self, ctx: PlanContext, svc: ServiceConfig) -> str | None:
        """Why this service cannot run here and is left out (with a warning), or None."""
        return None

    def validate(self, svc: ServiceConfig) -> list[tuple[str, str]]:
        """Kind-specific rules: (path relative to the service, message)."""
        return []

    def binary(self, ctx: PlanContext, fallback: str) -> str:
        """The kind's executable: the cluster's `binaries.<kind>`, else the fallback."""
        return ctx.cluster.binaries.get(self.name, fallback)


KINDS: Registry[ServiceKind] = Registry("service kind")
register_service = KINDS.register
get_kind = KINDS.get
kind_names = KINDS.names
