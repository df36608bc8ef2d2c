"""What every engine row shares: flags from `roles.<role>.args`, the worker env, the unit."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal, TypeVar

from srtd._registry import Registry, Row
from srtd._value import value_class
from srtd.context import PlanContext, render
from srtd.engines._dynamo_install import REMAP_ROOT, install_preamble
from srtd.engines._profiling import worker_env as profiling_env
from srtd.errors import PlanError
from srtd.layout import Place
from srtd.recipe import EngineConfig, LivenessSpec, Recipe, RoleConfig, Section
from srtd.topology import SYS, Endpoint, PortKind, PortPlan, Process
from srtd.unit import HttpProbe, Liveness, LogProbe, Readiness, Restart, RestartMode, Srun, TcpProbe, Unit, UnitKind

WorkerLaunch = Literal["dynamo", "direct"]
# The two ways a worker is launched: registered with Dynamo (`python -m dynamo.<engine>`),
# or the engine serving HTTP itself.  Compared through `WorkerMode.via_dynamo` only.
DYNAMO_LAUNCH: WorkerLaunch = "dynamo"
DIRECT_LAUNCH: WorkerLaunch = "direct"
ListStyle = Literal["nargs", "repeat"]


def flags(args: Mapping[str, Any], *, lists: ListStyle = "nargs") -> list[str]:
    """Engine flags from a mapping: `true` -> `--k`, `false`/null -> nothing, lists after one flag
    (`nargs`) or one flag per value (`repeat`), mappings as compact JSON, the rest as text."""
    out: list[str] = []
    for key, value in args.items():
        flag = f"--{key}"
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list | tuple):
            if lists == "repeat":
                for item in value:
                    out += [flag, _text(item)]
            else:
                out += [flag, *(_text(v) for v in value)]
        else:
            out += [flag, _text(value)]
    return out


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@value_class
class WorkerMode:
    """How the frontend wants its workers: registered with Dynamo, or serving HTTP themselves."""

    launch: WorkerLaunch
    disaggregated: bool
    public_port: int | None = None  # direct frontends: the single worker binds the public port

    @property
    def via_dynamo(self) -> bool:
        """The worker registers with Dynamo (`python -m dynamo.<engine>`, its system port)."""
        return self.launch == DYNAMO_LAUNCH


class Engine(Row):
    """One engine type.  Subclasses set `config` (the recipe model) and build the worker argv."""

    config: ClassVar[type[Section]]
    name: ClassVar[str] = ""
    launches: ClassVar[frozenset[str]] = frozenset({DYNAMO_LAUNCH, DIRECT_LAUNCH})
    launch_per_endpoint: ClassVar[bool] = False  # one step over all nodes of a worker (MPI engines)
    owned_flags: ClassVar[frozenset[str]] = frozenset()  # flags srtd sets itself
    list_style: ClassVar[ListStyle] = "nargs"
    fatal_patterns: ClassVar[tuple[str, ...]] = ()
    sets_visible_devices: ClassVar[bool] = True
    # The engine's own health endpoint, probed by `liveness: default`: this path on the
    # Dynamo system port (Dynamo launch) or on the worker's HTTP port (direct launch).
    # None: the engine has none srtd knows of, and `liveness: default` is refused.
    # Every row says it; none is assumed.
    health_path: ClassVar[str | None] = None
    served_flag: ClassVar[str | None] = None  # the row passes the served name itself with this flag
    memory_fraction_flag: ClassVar[str | None] = None  # its value: the share of each GPU's memory it takes (preflight)
    torch_profiler_dir_env: ClassVar[str | None] = None  # where the engine's torch profiler writes
    # Variables that make the engine emit NVTX ranges nsys can follow (observability's capture).
    nsys_env: ClassVar[Mapping[str, str]] = {}
    nsys_mpi: ClassVar[bool] = False  # `nsys profile` with the MPI engine flags (ucx, --kill none --wait all)

    # ------------------------------------------------------------------ questions

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        from srtd.topology import HTTP

        return PortPlan(every=(SYS,), leader=(HTTP,))

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        raise NotImplementedError

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        """Per-process variables derived from its ports."""
        return {}

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        """How to tell one worker serves: its own /health (Dynamo's system port, or its HTTP port)."""
        if not proc.is_leader:
            return None
        if mode.via_dynamo:
            port = proc.ports.get("sys")
        else:
            port = mode.public_port or proc.ports.get("http")
        if port is None:
            return None
        check = ctx.recipe.health_check
        return Readiness(
            probe=HttpProbe(node=proc.node, port=port, path="/health"),
            timeout_seconds=float(check.max_attempts * check.interval_seconds),
            interval_seconds=float(check.interval_seconds),
        )

    def health_probe(
        self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode
    ) -> HttpProbe | TcpProbe | LogProbe | None:
        """The engine's own health endpoint (`health_path`), for `liveness: default`."""
        if self.health_path is None or not proc.is_leader:
            return None
        port = proc.ports.get("sys") if mode.via_dynamo else mode.public_port or proc.ports.get("http")
        return HttpProbe(node=proc.node, port=port, path=self.health_path) if port else None

    def has_health(self, cfg: EngineConfig) -> bool:
        """Does `liveness: default` mean something for this engine?"""
        return self.health_path is not None

    def liveness_spec(self, recipe: Recipe, cfg: EngineConfig, role: str) -> LivenessSpec | None:
        """The role's `liveness:` (an engine-wide one, where the engine has it, is the fallback)."""
        return recipe.roles[role].liveness

    def liveness(
        self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode
    ) -> Liveness | None:
        """The worker's liveness check.  Port probes run on the leader (the one with the
        ports); a log heartbeat and log silence watch every process of the worker."""
        spec = self.liveness_spec(ctx.recipe, cfg, role)
        if spec is None:
            return None
        probe: HttpProbe | TcpProbe | LogProbe | None = None
        own = mode.public_port or proc.ports.get("http") or proc.ports.get("sys")
        if spec.default:
            probe = self.health_probe(ctx, cfg, proc, mode)
        elif spec.log is not None:
            probe = LogProbe(pattern=spec.log.pattern)
        elif proc.is_leader and spec.http is not None:
            port = spec.http.port or own
            if port:
                probe = HttpProbe(node=proc.node, port=port, path=spec.http.path, status=spec.http.status)
        elif proc.is_leader and (spec.port is not None or spec.tcp is not None):
            port = spec.port or (spec.tcp.port if spec.tcp else None) or own
            if port:
                probe = TcpProbe(node=proc.node, port=port)
        if probe is None and spec.log_silence_seconds is None:
            return None
        return Liveness(probe=probe, **spec.timings())

    def srun(self, ctx: PlanContext, cfg: EngineConfig, role: str, endpoint: Endpoint) -> Srun:
        options = {**ctx.cluster.default_srun_options, **ctx.recipe.srun_options}
        options.update(ctx.recipe.roles[role].srun_options)
        return Srun(options=options)

    def implied_services(self, recipe: Recipe) -> list[tuple[dict[str, Any], str]]:
        return []

    def validate(self, recipe: Recipe, cfg: EngineConfig, role: str) -> list[tuple[str, str]]:
        """(path, message) of rules this engine adds."""
        problems = []
        for key, value in recipe.roles[role].args.items():
            if key == "disaggregation-mode":
                # srtd sets it from the role; writing the same value is harmless.
                if value != role:
                    problems.append((f"roles.{role}.args.{key}", f"must be {role!r} on the {role} role, got {value!r}"))
            elif key in self.owned_flags:
                problems.append((f"roles.{role}.args.{key}", f"srtd sets --{key} itself; leave it out"))
        spec = self.liveness_spec(recipe, cfg, role)
        if spec is not None and spec.default and not self.has_health(cfg):
            problems.append(
                (
                    f"roles.{role}.liveness" if recipe.roles[role].liveness is not None else "engine.liveness",
                    f"`default` needs the engine's own health endpoint, and {self.name} has none srtd knows; "
                    "name a probe (http, tcp or log)",
                )
            )
        return problems

    def role_flags(self, ctx: PlanContext, role: str, values: Mapping[str, object]) -> list[str]:
        skip = {"disaggregation-mode"}  # srtd passes it from the role
        if self.served_flag:
            skip |= {"served-model-name", "served_model_name"}  # and the served name, once
        args = {
            k: (render(v, values) if isinstance(v, str) else v)
            for k, v in ctx.recipe.roles[role].args.items()
            if k not in skip
        }
        return [*flags(args, lists=self.list_style), *ctx.recipe.roles[role].extra_args]

    def served_model_name(self, ctx: PlanContext, role: str) -> str:
        return served_model_name(ctx.recipe, role, ctx.model_host_path)

    def mooncake_store_file(self, ctx: PlanContext, role: str, store: Mapping[str, Any]) -> str:
        """Write the role's Mooncake store client config; its path as the workers see it."""
        name = f"mooncake_store_config_{role}.json"
        ctx.files[ctx.job_file(Place.JOB, name, in_step=False)] = _mooncake_store_json(ctx, store)
        return ctx.job_file(Place.JOB, name, in_step=True)

    def visible_devices_env(self, ctx: PlanContext, cfg: EngineConfig) -> bool:
        """Pin a partial-node worker's GPUs with the visible-devices variable (else a flag does)."""
        return True

    # ------------------------------------------------------------------ units

    def units(self, ctx: PlanContext, cfg: EngineConfig, role: str, endpoint: Endpoint, mode: WorkerMode) -> list[Unit]:
        procs = ctx.processes_of(endpoint)
        if self.launch_per_endpoint:
            procs = procs[:1]
        group = endpoint.label if len(procs) > 1 else None
        return [self._unit(ctx, cfg, role, p, mode, group) for p in procs]

    def _unit(
        self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode, group: str | None
    ) -> Unit:
        recipe = ctx.recipe
        role_cfg = recipe.roles[role]
        endpoint = proc.endpoint
        name = f"{role}_{endpoint.index}_{proc.node}"
        values = {"node": proc.node, "node_id": ctx.nodes.workers.index(proc.node)}
        env = self.base_env(ctx, role, proc, mode)
        env.update({k: render(v, values) for k, v in role_cfg.env.items()})
        env.update({k: render(v, values) for k, v in recipe.environment.items()})
        env.update(profiling_env(ctx, role))
        if endpoint.partial and self.sets_visible_devices and self.visible_devices_env(ctx, cfg):
            env[ctx.cluster.visible_devices_env] = proc.visible_devices
        env.update(self.env(ctx, cfg, role, proc, mode))
        nodes = endpoint.nodes if self.launch_per_endpoint else (proc.node,)
        ports = dict(proc.ports)
        if mode.public_port is not None and proc.is_leader:
            ports["http"] = mode.public_port
        return Unit(
            name=name,
            kind=UnitKind.WORKER,
            phase="workers",
            nodes=nodes,
            gpus=endpoint.gpus if endpoint.partial else (),
            argv=tuple(self.argv(ctx, cfg, role, proc, mode)),
            preamble="\n".join(p for p in (self.role_preamble(ctx, cfg, role, proc), self.preamble(ctx, mode)) if p)
            or None,
            env={**ctx.job_env(), **env},
            container=ctx.container(role_cfg.container or recipe.model.container),
            srun=with_dynamo_install(ctx, self.srun(ctx, cfg, role, endpoint))
            if mode.via_dynamo
            else self.srun(ctx, cfg, role, endpoint),
            log=ctx.log(f"{proc.node}_{role}_w{endpoint.index}", Place.WORKER),
            ports=ports,
            readiness=self.readiness(ctx, cfg, proc, mode),
            liveness=self.liveness(ctx, cfg, role, proc, mode),
            fatal_patterns=self.patterns(recipe),
            restart=restart_of(role_cfg),
            critical=role_cfg.critical,
            tier=0,
            terminate_timeout=30.0,
            group=group,
            role=role,
            index=endpoint.index,
        )

    def patterns(self, recipe: Recipe) -> tuple[str, ...]:
        check = recipe.health_check
        if not check.fatal_log_markers:
            return ()
        return (*self.fatal_patterns, *check.extra_fatal_log_patterns)

    def role_preamble(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process) -> str | None:
        """Shell a row runs before the common preamble for one worker (None: nothing)."""
        return None

    def preamble(self, ctx: PlanContext, mode: WorkerMode) -> str | None:
        parts = [ctx.cluster.default_bash_preamble]
        script = ctx.recipe.setup_script
        if script:
            path = posixpath.join("/configs", script) if ctx.containerized else script
            parts.append(f"bash {_q(path)}")
        if mode.via_dynamo:
            parts.append(install_preamble(ctx))
        return "\n".join(p for p in parts if p) or None

    def base_env(self, ctx: PlanContext, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        env = {"HEAD_NODE_IP": ctx.address(ctx.nodes.head)}
        if "MOONCAKE_MASTER" in ctx.discovery:
            # Workers reach the job's Mooncake master; their own address is theirs, not localhost.
            env["MOONCAKE_MASTER"] = ctx.discovery["MOONCAKE_MASTER"]
            env["MOONCAKE_LOCAL_HOSTNAME"] = ctx.address(proc.node)
            if "MOONCAKE_METADATA" in ctx.discovery:
                env["MOONCAKE_TE_META_DATA_SERVER"] = ctx.discovery["MOONCAKE_METADATA"]
        own = ctx.recipe.roles[role].mooncake_store_config
        if own is not None or ctx.mooncake_store:
            # the master's store_config, with this role's keys over it
            store = {**(ctx.mooncake_store or {}), **(own or {})}
            env["MOONCAKE_CONFIG_PATH"] = self.mooncake_store_file(ctx, role, store)
        if mode.via_dynamo:
            env.update(dynamo_env(ctx))
            env.setdefault("DYN_LOG", DYN_LOG_DEFAULT)
            if "sys" in proc.ports:
                env["DYN_SYSTEM_PORT"] = str(proc.ports["sys"])
                # Without it the worker's /health stays 503 until an engine flips
                # it; with it, health follows the generate endpoint.
                env["DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS"] = '["generate"]'
                if ctx.local:
                    env["DYN_SYSTEM_HOST"] = "127.0.0.1"
        return env


def _mooncake_store_json(ctx: PlanContext, store: Mapping[str, Any]) -> str:
    data: dict[str, Any] = {}
    if "MOONCAKE_MASTER" in ctx.discovery:
        data["master_server_address"] = ctx.discovery["MOONCAKE_MASTER"]
    if "MOONCAKE_METADATA" in ctx.discovery:
        data["metadata_server"] = ctx.discovery["MOONCAKE_METADATA"]
    data.update(store)  # the recipe's settings win
    return json.dumps(data, indent=2) + "\n"


def with_dynamo_install(ctx: PlanContext, srun: Srun) -> Srun:
    """A Dynamo step that installs Dynamo first runs as root in its container."""
    if install_preamble(ctx) is None:
        return srun
    return replace(srun, export_env={**srun.export_env, **REMAP_ROOT})


def dynamo_env(ctx: PlanContext) -> dict[str, str]:
    """What every Dynamo process (frontend and workers) needs to find the others."""
    env = {k: v for k, v in ctx.discovery.items() if k in ("ETCD_ENDPOINTS", "NATS_SERVER")}
    dyn = ctx.recipe.dynamo
    env["DYN_REQUEST_PLANE"] = dyn.request_plane
    if dyn.event_plane:
        env["DYN_EVENT_PLANE"] = dyn.event_plane
    obs = ctx.recipe.observability
    if obs.enable_otel and obs.otel_endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = obs.otel_endpoint
        env["DYN_LOGGING_JSONL"] = "true"
    # Dynamo's Python bindings reformat SGLang's log lines unless told not to (every engine's image).
    env["DYN_SKIP_SGLANG_LOG_FORMATTING"] = "1"
    if ctx.local:
        # Everything is on this machine: advertise loopback, not the host's other address.
        for var in ("DYN_TCP_RPC_HOST", "DYN_EVENT_PLANE_HOST", "DYN_TCP_RESPONSE_STREAM_HOST"):
            env[var] = "127.0.0.1"
    return env


DYN_LOG_DEFAULT = "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn"


def dynamo_worker_flags(ctx: PlanContext, proc: Process, *, dump_config: bool = True) -> list[str]:
    """Flags every Dynamo worker takes: its request plane, and where to write its resolved config."""
    out = ["--request-plane", ctx.recipe.dynamo.request_plane]
    if dump_config:
        out += ["--dump-config-to", ctx.job_file(Place.WORKER, f"{proc.node}_config.json", in_step=True)]
    return out


def restart_of(role: RoleConfig) -> Restart:
    policy = role.restart
    return Restart(
        policy=RestartMode(policy.policy),
        max_restarts=policy.max_restarts,
        backoff_seconds=policy.backoff_seconds,
        max_backoff_seconds=policy.max_backoff_seconds,
        stable_seconds=max(60.0, 2 * policy.max_backoff_seconds),
    )


def served_model_name(recipe: Recipe, role: str | None, model_path: str) -> str:
    roles = [role] if role else list(recipe.roles)
    for r in roles:
        if r in recipe.roles:
            name = recipe.roles[r].args.get("served-model-name") or recipe.roles[r].args.get("served_model_name")
            if isinstance(name, str):
                return name
    engine = recipe.engine
    named = getattr(engine, "served_model_name", None)
    if isinstance(named, str):
        return named
    # the checkpoint directory's name (an hf: id keeps its repo path)
    if model_path.startswith("hf:"):
        return model_path[3:]
    return posixpath.basename(model_path.rstrip("/")) or model_path


def _q(text: str) -> str:
    import shlex

    return shlex.quote(text)


def disagg_mode(role: str) -> list[str]:
    """`--disaggregation-mode` for a prefill or decode role (the flag SGLang, vLLM, TRT-LLM and the mocker share)."""
    return ["--disaggregation-mode", role] if role in ("prefill", "decode") else []


def need_port(proc: Process, kind: PortKind) -> int:
    try:
        return proc.ports[kind.name]
    except KeyError:
        raise PlanError(f"{proc.endpoint.label} on {proc.node} has no {kind.name} port") from None


ENGINES: Registry[Engine] = Registry("engine")
E = TypeVar("E", bound=type[Engine])


def register_engine(config: type[Section]) -> Callable[[E], E]:
    """Register an engine row for a recipe engine model (`@register_engine(SGLangEngine)`):
    the row's name is the model's `type`."""

    def decorate(cls: E) -> E:
        cls.config = config
        ENGINES.register(str(config.model_fields["type"].default))(cls)
        return cls

    return decorate


def engine_row(cfg: EngineConfig) -> Engine:
    row = ENGINES.get(cfg.type)
    if row is None or not isinstance(cfg, row.config):
        raise KeyError(type(cfg))
    return row


def all_rows() -> Sequence[Engine]:
    return ENGINES.rows()
