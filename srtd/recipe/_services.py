"""The `services:` list: everything that is not a worker or the frontend.

Shape and the rules that need no knowledge of service kinds live here; the rules
of each kind (`generic` needs a command, which kinds accept `external`, option
keys, ...) belong to its row in `srtd.services`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, model_validator

from srtd.recipe._base import MAX_JOB_NODES, AnyMap, EnvMap, Name, Rules, Section, SrunOptions, StrSeq
from srtd.recipe._probes import LivenessField, ServiceReadiness

PlacementNode = Literal["head", "infra", "dedicated", "prefill", "decode", "agg", "workers", "compute", "all"]
StartPhase = Literal["infra", "before_workers", "with_workers", "after_frontend"]
WORKER_PLACEMENTS = frozenset({"prefill", "decode", "agg", "workers"})
SINGLE_NODE_PLACEMENTS = frozenset({"head", "infra", "dedicated"})
MOVING_REVS = frozenset({"main", "master", "HEAD", "head", "trunk", "develop"})


class ServicePlacement(Section):
    """Where a service runs."""

    node: PlacementNode = "head"
    """`head` / `infra` / `dedicated` (one instance), `prefill` / `decode` / `agg` (one per node
    of that role), `workers` (one per worker node; an owner's own pool), `compute` (worker nodes
    and every pool), `all` (every node)."""
    pool: str | None = None
    """Ride on the nodes another service owns: one instance per node of that pool."""
    per: Literal["node", "worker"] = "node"
    """`worker`: one instance per engine worker of the placed nodes, in its GPU view."""


class SourceConfig(Section):
    """A git repository at an immutable ref, cloned before the service is built."""

    git: str
    """Repository URL."""
    rev: str
    """Commit SHA, tag, or `refs/pull/<n>/head`; branch names move and are refused."""
    path: str | None = None
    """Subdirectory of the clone to build and run from."""
    sha: str | None = None
    """The commit `rev` resolved to, when pinned."""


class ServiceMetrics(Section):
    """One Prometheus endpoint a service serves."""

    port: int
    """Port of the endpoint."""
    path: str = "/metrics"
    """URL path of the endpoint."""
    nodes: Literal["all", "first"] = "all"
    """Scrape every node the service runs on, or only its first."""
    name: str | None = None
    """Endpoint name; defaults to the service name."""


def _metrics_as_list(value: Any) -> Any:
    # One mapping is short for a list of one.
    if isinstance(value, dict):
        return (value,)
    if isinstance(value, list):
        return tuple(value)
    return value


MetricsField = Annotated[
    tuple[ServiceMetrics, ...],
    BeforeValidator(_metrics_as_list, json_schema_input_type=ServiceMetrics | list[ServiceMetrics]),
]


class ServiceConfig(Section):
    """One entry of `services:`."""

    name: Name
    """Unique label; names the unit (`service_<name>`) and its log."""
    type: str = "generic"
    """Service kind: generic, etcd, nats, mooncake-master, mooncake-store, lmcache-server,
    dcgm-exporter, node-exporter, process-exporter, ray, gms."""
    command: StrSeq | None = None
    """Argv, never shell-interpreted.  Required for `generic`; typed kinds have a default."""
    args: StrSeq = ()
    """Appended to `command`."""
    container: str | None = None
    """Image or cluster alias; defaults to the kind's image, then the job's."""
    env: EnvMap = {}
    """Environment, over what the kind injects."""
    source: SourceConfig | None = None
    """Clone this before `build_command` and `command` run (single-node placements only)."""
    build_command: StrSeq | None = None
    """Argv run once from the clone, before `command`."""
    placement: ServicePlacement | None = None
    """Where the service runs; defaults to the kind's placement."""
    nodes: int | None = None
    """Whole nodes this service owns (its pool), added to the allocation after the roles'."""
    start: StartPhase | None = None
    """Phase: `infra`, `before_workers` or `after_frontend`; defaults to the kind's."""
    readiness: ServiceReadiness | None = None
    """Probe that gates what comes after; defaults to the kind's."""
    inherit_discovery_env: bool = True
    """Inject ETCD_ENDPOINTS / NATS_SERVER of the job's discovery plane."""
    critical: bool | None = None
    """A crash fails the job; defaults to the kind's."""
    terminal: bool = False
    """The job ends when every instance of every terminal service has exited."""
    preamble: str | None = None
    """Shell run before `command`."""
    cpus_per_task: int | None = None
    """srun --cpus-per-task."""
    cpu_bind: str | None = None
    """srun --cpu-bind."""
    srun_options: SrunOptions = {}
    """Extra srun options for this service."""
    build_timeout_seconds: int = 1800
    """Kill `build_command` after this long."""
    enabled: bool = True
    """`false` drops the service, including an implied one of the same name."""
    external: str | None = None
    """Address of an instance that already runs: launch nothing, point the job at it."""
    options: AnyMap = {}
    """Kind-specific settings; unknown keys are refused by the kind."""
    metrics: MetricsField = ()
    """Prometheus endpoints the service serves (one mapping or a list)."""
    after: StrSeq = ()
    """srtd: names of services that must be ready before this one starts."""
    liveness: LivenessField = None
    """srtd: find a hung service while it is ready (`default`: its readiness probe)."""

    @property
    def placement_node(self) -> str | None:
        """The placement written in the recipe, or None to take the kind's default."""
        if self.placement is None or "node" not in self.placement.model_fields_set:
            return None
        return self.placement.node

    @model_validator(mode="after")
    def _rules(self) -> ServiceConfig:
        rules = Rules()
        if not self.name.strip():
            rules.add("name", "must not be empty")
        for field in ("command", "args", "build_command"):
            for i, arg in enumerate(getattr(self, field) or ()):
                if not arg.strip():
                    rules.add(f"{field}.{i}", "must not be blank")
        if self.command is not None and not self.command:
            rules.add("command", "must not be empty; leave it out to use the kind's command")
        if self.build_command is not None and not self.build_command:
            rules.add("build_command", "must not be empty")
        if self.nodes is not None and self.nodes < 1:
            rules.add("nodes", f"must be at least 1, got {self.nodes}")
        if self.nodes is not None and self.nodes > MAX_JOB_NODES:
            rules.add("nodes", f"must be at most {MAX_JOB_NODES} (a job's node limit), got {self.nodes}")
        if self.cpus_per_task is not None and self.cpus_per_task < 1:
            rules.add("cpus_per_task", f"must be at least 1, got {self.cpus_per_task}")
        if self.build_timeout_seconds <= 0:
            rules.add("build_timeout_seconds", f"must be positive, got {self.build_timeout_seconds}")
        if self.external is not None and not self.external.strip():
            rules.add("external", "must not be empty")
        if self.external is not None and self.terminal:
            rules.add("terminal", "an external service launches nothing, so it cannot be terminal")
        self._placement_rules(rules)
        self._source_rules(rules)
        names = [m.name for m in self.metrics]
        if len(self.metrics) > 1 and (None in names or len(set(names)) != len(names)):
            rules.add("metrics", "several endpoints need distinct `name`s")
        if self.name in self.after:
            rules.add("after", f"service {self.name!r} cannot wait for itself")
        rules.check()
        return self

    def _placement_rules(self, rules: Rules) -> None:
        placement = self.placement
        if placement is None:
            return
        if placement.pool is not None:
            if self.placement_node is not None:
                rules.add("placement.pool", "replaces placement.node; give one of them")
            if self.nodes is not None:
                rules.add("placement.pool", "a service that owns nodes runs on its own pool")
        if placement.per == "worker":
            # Without a written node the kind's default placement decides (checked with the kinds).
            if self.placement_node is not None and self.placement_node not in WORKER_PLACEMENTS:
                rules.add(
                    "placement.per",
                    f"`per: worker` needs placement.node prefill, decode, agg or workers, not {placement.node!r}",
                )
            if placement.pool is not None:
                rules.add("placement.per", "`per: worker` cannot ride on a pool")
            if self.nodes is not None:
                rules.add("placement.per", "`per: worker` cannot own nodes")
            if self.readiness is not None and self.readiness.log is None:
                rules.add(
                    "readiness",
                    "per-worker instances share their node's ports; only a `log` probe can tell them apart",
                )
            if self.liveness is not None and self.liveness.named_probe() not in (None, "log"):
                rules.add(
                    "liveness",
                    "per-worker instances share their node's ports; only a `log` probe or "
                    "`log_silence_seconds` can tell them apart",
                )
        if self.nodes is not None and self.placement_node not in (None, "workers"):
            rules.add("placement.node", "a service that owns nodes is placed on its own pool (`workers`)")

    def _source_rules(self, rules: Rules) -> None:
        if self.source is None:
            return
        rev = self.source.rev.strip()
        if rev in MOVING_REVS or rev.startswith("refs/heads/"):
            rules.add(
                "source.rev",
                f"{rev!r} is a branch and moves; use a commit SHA, a tag or refs/pull/<n>/head",
            )
        if self.nodes is not None or (
            self.placement_node is not None and self.placement_node not in SINGLE_NODE_PLACEMENTS
        ):
            rules.add("source", "a source build needs a single-node placement (head, infra or dedicated)")
