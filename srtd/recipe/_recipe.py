"""The whole recipe, and the rules that span its sections."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from srtd.recipe._base import MAX_WORKERS, EnvMap, Name, Rules, Section, SrunOptions, StrMap, StrSeq
from srtd.recipe._engines import CustomEngine, EngineConfig, EngineField
from srtd.recipe._observability import ObservabilityConfig, ProfilingConfig, TelemetryConfig
from srtd.recipe._reporting import IdentityConfig, ReportingConfig
from srtd.recipe._roles import ROLE_NAMES, RoleConfig
from srtd.recipe._sections import (
    MANUAL_BENCHMARK,
    NO_FRONTEND,
    BenchmarkConfig,
    DynamoConfig,
    FrontendConfig,
    HealthCheckConfig,
    HostSetupConfig,
    ModelConfig,
    OutputConfig,
    PostEvalConfig,
    PreflightConfig,
    PreflightField,
    ResourceConfig,
    SlurmConfig,
)
from srtd.recipe._services import ServiceConfig


class Recipe(Section):
    """One job: model, worker roles, frontend, services and benchmark."""

    name: Name
    """Job name: the Slurm job name and the run's label."""
    model: ModelConfig
    """Model weights, container image and precision."""
    resources: ResourceConfig
    """GPU type, GPUs per node, allocation knobs."""
    schema_: Literal[2] = Field(alias="schema")
    """Recipe layout version; always 2."""
    slurm: SlurmConfig = Field(default_factory=SlurmConfig)
    """Account, partition, time limit."""
    engine: EngineField = None
    """The engine of every role: a name or a mapping with `type` and engine-wide knobs."""
    roles: dict[Name, RoleConfig] = {}
    """Worker roles: prefill, decode, agg."""
    frontend: FrontendConfig = Field(default_factory=FrontendConfig)
    """The HTTP entry point and where it runs."""
    dynamo: DynamoConfig = Field(default_factory=DynamoConfig)
    """Dynamo install, planes and sidecar."""
    benchmark: BenchmarkConfig = Field(default_factory=BenchmarkConfig)
    """The client run once everything is ready."""
    profiling: ProfilingConfig = Field(default_factory=ProfilingConfig)
    """Profiling of the workers."""
    output: OutputConfig = Field(default_factory=OutputConfig)
    """Where logs go."""
    health_check: HealthCheckConfig = Field(default_factory=HealthCheckConfig)
    """The frontend gate's patience, and fatal log lines."""
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """Metrics, traces, capture."""
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    """Power sampling."""
    environment: EnvMap = {}
    """Environment of every worker, after `roles.<role>.env`; `{node}` and `{node_id}` expand."""
    container_mounts: StrMap = {}
    """Host path -> container path for every container."""
    extra_mount: StrSeq | None = None
    """More mounts as `host:container[:ro]`."""
    srun_options: SrunOptions = {}
    """srun options of every step (`key: value` -> `--key=value`; "" -> `--key`)."""
    sbatch_directives: StrMap = {}
    """Extra `#SBATCH` lines (`key: value` -> `--key=value`)."""
    enable_config_dump: bool = True
    """Accepted for compatibility; ignored."""
    setup_script: str | None = None
    """Script under /configs run in each worker container before the engine."""
    host_setup: HostSetupConfig = Field(default_factory=HostSetupConfig)
    """Commands on each bare host before workers start."""
    preflight: PreflightField = Field(default_factory=PreflightConfig)
    """The per-node check before the units launch; `false` turns it off."""
    services: tuple[ServiceConfig, ...] = ()
    """Long-running processes next to the workers."""
    post_eval: PostEvalConfig = Field(default_factory=PostEvalConfig)
    """Evaluation after the benchmark."""
    identity: IdentityConfig = Field(default_factory=IdentityConfig)
    """What should be running."""
    reporting: ReportingConfig | None = None
    """Status reporting and uploads."""
    sweep: dict[str, tuple[Any, ...]] | None = None
    """Parameter sweep; expanded by the loader into one recipe per combination."""

    # ------------------------------------------------------------------ derived

    def engine_for(self, role: str) -> EngineConfig | None:
        """The engine of a role: its own, or the recipe's."""
        return self.roles[role].engine or self.engine

    @property
    def disaggregated(self) -> bool:
        return "prefill" in self.roles or "decode" in self.roles

    @property
    def pool_owners(self) -> tuple[ServiceConfig, ...]:
        return tuple(s for s in self.services if s.nodes is not None and s.enabled)

    # ------------------------------------------------------------------ rules

    @model_validator(mode="after")
    def _rules(self) -> Recipe:
        rules = Rules()
        self._role_rules(rules)
        self._service_rules(rules)
        if self.frontend.type == NO_FRONTEND:
            engines = {r: self.engine_for(r) for r in self.roles}
            served = [r for r, e in engines.items() if e is not None and not isinstance(e, CustomEngine)]
            if served:
                rules.add(
                    "frontend.type",
                    f"`none` runs no frontend, so only custom-engine roles (gated by their own `health`) "
                    f"may run; roles.{served[0]} uses {engines[served[0]].type}",  # type: ignore[union-attr]
                )
        terminal = [s.name for s in self.services if s.terminal and s.enabled]
        if terminal and self.benchmark.type != MANUAL_BENCHMARK:
            rules.add(
                "benchmark.type",
                f"terminal services ({', '.join(terminal)}) are the job's run; "
                f"benchmark.type must stay `manual`, not {self.benchmark.type!r}",
            )
        rules.check()
        return self

    def _role_rules(self, rules: Rules) -> None:
        workers = sum(role.workers or 1 for role in self.roles.values())
        if workers > MAX_WORKERS:
            rules.add("roles", f"the roles have {workers} workers in all, more than {MAX_WORKERS} (a job's limit)")
        for name in self.roles:
            if name not in ROLE_NAMES:
                rules.add(f"roles.{name}", f"unknown role {name!r}; roles are {', '.join(ROLE_NAMES)}")
        if "agg" in self.roles and self.disaggregated:
            rules.add("roles.agg", "an aggregated role cannot be combined with prefill/decode roles")
        for one, other in (("prefill", "decode"), ("decode", "prefill")):
            if one in self.roles and other not in self.roles:
                rules.add(
                    f"roles.{one}",
                    f"a disaggregated recipe needs both prefill and decode; {other} is missing",
                )
        with_engine = [n for n, r in self.roles.items() if r.engine is not None]
        if self.engine is not None and with_engine:
            rules.add(
                f"roles.{with_engine[0]}.engine",
                "the recipe has a top-level `engine`; set the engine there or on every role, not both",
            )
        if self.engine is None and self.roles:
            missing = [n for n, r in self.roles.items() if r.engine is None]
            if missing:
                rules.add("engine", f"worker roles need an engine: set `engine` or roles.{missing[0]}.engine")
        for name, role in self.roles.items():
            if role.colocated and name != "decode":
                rules.add(f"roles.{name}.nodes", "only the decode role can colocate onto the prefill nodes")
        decode = self.roles.get("decode")
        prefill = self.roles.get("prefill")
        if decode is not None and decode.colocated and prefill is not None:
            self._colocation_rules(rules, prefill, decode)

    def _colocation_rules(self, rules: Rules, prefill: RoleConfig, decode: RoleConfig) -> None:
        if prefill.gpus is None or decode.gpus is None:
            role = "prefill" if prefill.gpus is None else "decode"
            rules.add(f"roles.{role}.gpus", "both roles must state `gpus` when decode colocates")
            return
        if not isinstance(prefill.nodes, int) or prefill.nodes < 1:
            rules.add("roles.prefill.nodes", "decode colocates onto the prefill nodes, so prefill needs nodes")
            return
        capacity = prefill.nodes * self.resources.gpus_per_node
        used = prefill.gpus * (prefill.workers or 1) + decode.gpus * (decode.workers or 1)
        if used > capacity:
            rules.add(
                "roles.decode.gpus",
                f"prefill and colocated decode need {used} GPUs but the {prefill.nodes} prefill "
                f"node(s) have {capacity}",
            )

    def _service_rules(self, rules: Rules) -> None:
        seen: dict[str, int] = {}
        owners = {s.name for s in self.services if s.nodes is not None}
        for i, service in enumerate(self.services):
            if service.name in seen:
                rules.add(
                    f"services.{i}.name",
                    f"duplicate service name {service.name!r} (also services.{seen[service.name]})",
                )
            seen.setdefault(service.name, i)
            pool = service.placement.pool if service.placement else None
            if pool is not None and pool not in owners:
                known = ", ".join(sorted(owners)) or "none"
                rules.add(
                    f"services.{i}.placement.pool",
                    f"{pool!r} is not a pool (services that own nodes: {known})",
                )
            if service.nodes is not None and self.resources.het_jobs:
                rules.add(f"services.{i}.nodes", "pools are not supported with resources.het_jobs")
