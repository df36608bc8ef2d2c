"""The engine rows: how each engine's worker is launched."""

from __future__ import annotations

import posixpath
from typing import Any

from srtd.context import PlanContext, render
from srtd.engines._base import Engine, WorkerMode, need_port, register_engine
from srtd.recipe import CustomEngine, EngineConfig, LivenessSpec, Recipe, ToyEngine
from srtd.recipe._engines import AtomEngine, MockerEngine, SGLangEngine, TileRTEngine, TRTLLMEngine, VLLMEngine
from srtd.topology import (
    BOOTSTRAP,
    DIST_INIT,
    HTTP,
    KV_EVENTS,
    NCCL,
    NIXL,
    SYS,
    TRTLLM_DIST_INIT,
    VLLM_SCAN,
    PortPlan,
    Process,
)
from srtd.unit import HttpProbe, LogProbe, Readiness, Srun, TcpProbe, WorkerCountProbe


def dump_yaml(data: dict[str, Any]) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    yaml.dump(_plain(data), out)
    return out.getvalue()


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


TRTLLM_FATAL = (r"^Rank\d+ Task exit code: (?!0$)\d+$", r"Failed to initialize executor")
# Dynamo's Rust runtime: a panicked tokio task can leave the process up with its engine
# gone ("thread 'tokio-runtime-worker' panicked at lib/...rs:L:C:"), so the line is the
# only sign.
DYNAMO_FATAL = (r"thread '[^']*' panicked at ",)


def _disagg_mode(role: str) -> list[str]:
    return ["--disaggregation-mode", role] if role in ("prefill", "decode") else []


def _multi_node(ctx: PlanContext, proc: Process) -> list[str]:
    endpoint = proc.endpoint
    if len(endpoint.nodes) == 1:
        return []
    leader = next(p for p in ctx.processes[endpoint.role] if p.endpoint == endpoint and p.is_leader)
    addr = f"{ctx.address(leader.node)}:{need_port(leader, DIST_INIT)}"
    return ["--dist-init-addr", addr, "--nnodes", str(len(endpoint.nodes)), "--node-rank", str(proc.node_rank)]


@register_engine(SGLangEngine)
class SGLang(Engine):
    health_path = "/health"  # sglang.launch_server and the Dynamo system port
    owned_flags = frozenset({"port", "host", "model-path", "disaggregation-mode", "nccl-port", "dist-init-addr"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(
            every=(SYS, KV_EVENTS, NIXL, NCCL, DIST_INIT),
            leader=(HTTP,),
            per_role={"prefill": (BOOTSTRAP,)},
        )

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        module = "dynamo.sglang" if mode.launch == "dynamo" else "sglang.launch_server"
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports.get("http")
        argv = ["python3", "-m", module, "--model-path", ctx.model_path]
        if mode.launch == "direct":
            argv += ["--host", "0.0.0.0"]
        if http:
            argv += ["--port", str(http)]
        argv += ["--nccl-port", str(need_port(proc, NCCL))]
        argv += _disagg_mode(role) if mode.disaggregated else []
        if role == "prefill" and "bootstrap" in proc.ports:
            argv += ["--disaggregation-bootstrap-port", str(proc.ports["bootstrap"])]
        argv += _multi_node(ctx, proc)
        return argv + self.role_flags(ctx, role, {"node": proc.node})

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        env = {"SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0", "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0"}
        if mode.launch == "dynamo":
            env["DYN_SKIP_SGLANG_LOG_FORMATTING"] = "1"
        return env


_VLLM_CONNECTORS = {
    "nixl": '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
    "lmcache": '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
    "lmcache-mp": '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both"}',
    "kvbm": '{"kv_connector":"DynamoConnector","kv_role":"kv_both"}',
    "moriio": '{"kv_connector":"MoRIIOConnector","kv_role":"kv_both"}',
}


@register_engine(VLLMEngine)
class VLLM(Engine):
    health_path = "/health"  # vllm serve and the Dynamo system port
    owned_flags = frozenset({"port", "host", "model", "disaggregation-mode", "kv-transfer-config-from-connector"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(SYS, KV_EVENTS, NIXL, VLLM_SCAN), leader=(HTTP,))

    def connector(self, ctx: PlanContext, cfg: EngineConfig, role: str) -> str | None:
        own = ctx.recipe.roles[role].args.get("connector")
        if isinstance(own, str):
            return own
        return cfg.connector if isinstance(cfg, VLLMEngine) else None

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports.get("http")
        if mode.launch == "dynamo":
            argv = ["python3", "-m", "dynamo.vllm", "--model", ctx.model_path]
        else:
            binary = cfg.vllm_serve_binary if isinstance(cfg, VLLMEngine) else "vllm"
            argv = [binary, "serve", ctx.model_path, "--host", "0.0.0.0"]
        if http and mode.launch == "direct":
            argv += ["--port", str(http)]
        if mode.launch == "dynamo" and mode.disaggregated:
            argv += _disagg_mode(role)  # `vllm serve` tells roles apart by its KV connector alone
        args = ctx.recipe.roles[role].args
        connector = self.connector(ctx, cfg, role)
        if mode.disaggregated and connector and "kv-transfer-config" not in args:
            argv += ["--kv-transfer-config", _VLLM_CONNECTORS.get(connector, connector)]
        flags = self.role_flags(ctx, role, {"node": proc.node})
        return argv + _drop_flag(flags, "--connector")

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        env = {"VLLM_PORT": str(proc.ports["vllm_scan"])} if "vllm_scan" in proc.ports else {}
        if "nixl" in proc.ports:
            env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(proc.ports["nixl"])
            env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = ctx.address(proc.node)
        return env

    def implied_services(self, recipe: Recipe) -> list[tuple[dict[str, Any], str]]:
        out: list[tuple[dict[str, Any], str]] = []
        roles_with_lmcache = [
            role
            for role in recipe.roles
            if isinstance(recipe.engine_for(role), VLLMEngine)
            and (recipe.roles[role].args.get("connector") or getattr(recipe.engine_for(role), "connector", None))
            == "lmcache-mp"
        ]
        if roles_with_lmcache:
            node = roles_with_lmcache[0] if len(roles_with_lmcache) == 1 else "workers"
            out.append(
                (
                    {"name": "lmcache-server", "type": "lmcache-server", "placement": {"node": node}},
                    "a vLLM role with connector lmcache-mp",
                )
            )
        failover = [r for r in recipe.roles if isinstance(recipe.engine_for(r), VLLMEngine)]
        if any(getattr(recipe.engine_for(r), "failover", None) for r in failover):
            out.append(
                (
                    {"name": "gms", "type": "gms", "placement": {"node": "workers", "per": "worker"}},
                    "engine.failover (shadow engine recovery)",
                )
            )
        return out


def _drop_flag(argv: list[str], flag: str) -> list[str]:
    # `connector` in a role's args chooses the KV connector; it is not a vLLM flag.
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        out.append(arg)
    return out


@register_engine(TRTLLMEngine)
class TRTLLM(Engine):
    health_path = "/health"  # trtllm-serve and the Dynamo system port
    launch_per_endpoint = True
    fatal_patterns = TRTLLM_FATAL
    owned_flags = frozenset({"port", "host", "model-path"})
    sets_visible_devices = False  # the launcher wrapper picks GPUs per node

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(SYS, KV_EVENTS, NIXL), leader=(HTTP, TRTLLM_DIST_INIT))

    def config_file(self, ctx: PlanContext, role: str, *, in_step: bool) -> str:
        root = ctx.logs_path if in_step else ctx.log_dir
        return posixpath.join(root, f"trtllm_{role}.yaml")

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        served = self.served_model_name(ctx, role)
        config = self.config_file(ctx, role, in_step=True)
        # TRT-LLM reads a role's args from a YAML file, not from flags.
        ctx.files[self.config_file(ctx, role, in_step=False)] = dump_yaml(dict(ctx.recipe.roles[role].args))
        launcher = ["trtllm-llmapi-launch"] if proc.endpoint.gpu_count > 1 else []
        if mode.launch == "dynamo":
            argv = [*launcher, "python3", "-m", "dynamo.trtllm", "--model-path", ctx.model_path]
            argv += ["--served-model-name", served, "--extra-engine-args", config]
            argv += _disagg_mode(role) if mode.disaggregated else []
            if isinstance(cfg, TRTLLMEngine):
                if cfg.publish_events_and_metrics:
                    argv.append("--publish-events-and-metrics")
                elif cfg.publish_metrics:
                    argv.append("--publish-metrics")
            return argv + list(ctx.recipe.roles[role].extra_args)
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        argv = [*launcher, "trtllm-serve", ctx.model_path, "--host", "0.0.0.0", "--port", str(http)]
        argv += ["--extra_llm_api_options", config]
        return argv + list(ctx.recipe.roles[role].extra_args)

    def srun(self, ctx: PlanContext, cfg: EngineConfig, role: str, endpoint: Any) -> Srun:
        base = super().srun(ctx, cfg, role, endpoint)
        options = {**base.options, "kill-on-bad-exit": "1", "ntasks-per-node": str(len(endpoint.gpus))}
        return Srun(
            ntasks=endpoint.gpu_count,
            mpi="pmix",
            oversubscribe=True,
            cpu_bind="verbose,none",
            options=options,
        )

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        ready = super().readiness(ctx, cfg, proc, mode)
        if ready is None or mode.launch != "dynamo":
            return ready
        # dynamo.trtllm answers on its system port once the engine is up.
        return Readiness(
            probe=TcpProbe(node=proc.node, port=proc.ports["sys"]),
            timeout_seconds=ready.timeout_seconds,
            interval_seconds=ready.interval_seconds,
        )


@register_engine(MockerEngine)
class Mocker(Engine):
    """Dynamo's simulated engine (`python3 -m dynamo.mocker`), checked against ai-dynamo 1.6.1."""

    health_path = "/health"  # the Dynamo system port

    launches = frozenset({"dynamo"})
    fatal_patterns = DYNAMO_FATAL
    owned_flags = frozenset({"model-path", "model-name", "disaggregation-mode", "bootstrap-ports"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        cfg = recipe.engine_for(role)
        workers = cfg.num_workers if isinstance(cfg, MockerEngine) else 1
        # one bootstrap port per simulated engine of the process
        return PortPlan(every=(SYS,), per_role={"prefill": (BOOTSTRAP,)}, sizes={BOOTSTRAP.name: workers})

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        assert isinstance(cfg, MockerEngine)
        argv = ["python3", "-m", "dynamo.mocker", "--model-path", ctx.model_path]
        argv += ["--model-name", self.served_model_name(ctx, role)]
        argv += ["--engine-type", cfg.engine_type, "--speedup-ratio", _num(cfg.speedup_ratio)]
        if cfg.decode_speedup_ratio != 1.0:
            argv += ["--decode-speedup-ratio", _num(cfg.decode_speedup_ratio)]
        argv += ["--num-gpu-blocks-override", str(cfg.num_gpu_blocks_override)]
        argv += ["--max-num-seqs", str(cfg.max_num_seqs)]
        argv += ["--max-num-batched-tokens", str(cfg.max_num_batched_tokens)]
        if cfg.block_size is not None:
            argv += ["--block-size", str(cfg.block_size)]
        if cfg.data_parallel_size != 1:
            argv += ["--data-parallel-size", str(cfg.data_parallel_size)]
        if cfg.num_workers != 1:
            argv += ["--num-workers", str(cfg.num_workers)]
        if cfg.startup_time is not None:
            argv += ["--startup-time", _num(cfg.startup_time)]
        if cfg.kv_transfer_bandwidth is not None:
            argv += ["--kv-transfer-bandwidth", _num(cfg.kv_transfer_bandwidth)]
        if cfg.kv_cache_dtype is not None:
            argv += ["--kv-cache-dtype", cfg.kv_cache_dtype]
        if not cfg.enable_prefix_caching:
            argv.append("--no-enable-prefix-caching")
        if not cfg.enable_chunked_prefill:
            argv.append("--no-enable-chunked-prefill")
        if cfg.preemption_mode is not None:
            argv += ["--preemption-mode", cfg.preemption_mode]
        argv += _disagg_mode(role) if mode.disaggregated else []
        if role == "prefill" and "bootstrap" in proc.ports:
            first = proc.ports["bootstrap"]
            argv += ["--bootstrap-ports", ",".join(str(first + i) for i in range(cfg.num_workers))]
        return argv + self.role_flags(ctx, role, {"node": proc.node})


def _num(value: float) -> str:
    return f"{value:g}"


@register_engine(CustomEngine)
class Custom(Engine):
    """Bring your own worker: the recipe's argv template, probed by its own `health`."""

    health_path = None  # `liveness: default` is the recipe's own `health` probe

    launches = frozenset({"direct"})

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        assert isinstance(cfg, CustomEngine)
        values = self.placeholders(ctx, role, proc, mode)
        return [render(a, values) for a in cfg.command] + self.role_flags(ctx, role, values)

    def placeholders(self, ctx: PlanContext, role: str, proc: Process, mode: WorkerMode) -> dict[str, object]:
        port = mode.public_port if mode.public_port and proc.is_leader else proc.ports.get("http", 0)
        return {
            "host": ctx.address(proc.node),
            "port": port,
            "role": role,
            "index": proc.endpoint.index,
            "node": proc.node,
            "node_rank": proc.node_rank,
            "gpus": proc.visible_devices,
            "gpu_count": len(proc.gpus),
            "model_path": ctx.model_path,
            "served_model_name": self.served_model_name(ctx, role),
            "log_dir": ctx.logs_path,
        }

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        assert isinstance(cfg, CustomEngine)
        health = cfg.health
        if health is None or not proc.is_leader:
            return None
        own = mode.public_port if mode.public_port else proc.ports.get("http", 0)
        probe: TcpProbe | HttpProbe | LogProbe
        if health.log is not None:
            probe = LogProbe(pattern=health.log.pattern)
        elif health.http is not None:
            probe = HttpProbe(
                node=proc.node, port=health.http.port or own, path=health.http.path, status=health.http.status
            )
        else:
            port = health.port or (health.tcp.port if health.tcp else None) or own
            probe = TcpProbe(node=proc.node, port=port)
        return Readiness(
            probe=probe, timeout_seconds=float(health.timeout_seconds), interval_seconds=float(health.interval_seconds)
        )

    def health_probe(
        self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode
    ) -> HttpProbe | TcpProbe | LogProbe | None:
        ready = self.readiness(ctx, cfg, proc, mode)  # the recipe's `health`, resolved
        if ready is None or isinstance(ready.probe, WorkerCountProbe):
            return None
        return ready.probe

    def has_health(self, cfg: EngineConfig) -> bool:
        return isinstance(cfg, CustomEngine) and cfg.health is not None

    def liveness_spec(self, recipe: Recipe, cfg: EngineConfig, role: str) -> LivenessSpec | None:
        own = cfg.liveness if isinstance(cfg, CustomEngine) else None
        return recipe.roles[role].liveness or own

    def patterns(self, recipe: Recipe) -> tuple[str, ...]:
        own: tuple[str, ...] = ()
        for role in recipe.roles:
            cfg = recipe.engine_for(role)
            if isinstance(cfg, CustomEngine):
                own = tuple(cfg.fatal_log_patterns)
        check = recipe.health_check
        return (*own, *check.extra_fatal_log_patterns) if check.fatal_log_markers else ()


@register_engine(ToyEngine)
class Toy(Engine):
    """srtd's toy OpenAI-compatible worker: demos and tests without a GPU."""

    health_path = "/health"

    launches = frozenset({"direct"})
    owned_flags = frozenset({"host", "port", "model", "role"})
    sets_visible_devices = False

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(leader=(HTTP,))

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        assert isinstance(cfg, ToyEngine)
        port = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        bind = "127.0.0.1" if ctx.local else "0.0.0.0"
        argv = ["srtd-toy-worker", "--host", bind, "--port", str(port)]
        argv += ["--model", self.served_model_name(ctx, role), "--role", role]
        argv += ["--token-latency-ms", _num(cfg.token_latency_ms)]
        return argv + self.role_flags(ctx, role, {"node": proc.node})

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        port = mode.public_port if mode.public_port else proc.ports["http"]
        return Readiness(probe=HttpProbe(node=proc.node, port=port, path="/health"), timeout_seconds=120.0)

    def served_model_name(self, ctx: PlanContext, role: str) -> str:
        from srtd.engines._base import served_model_name

        return served_model_name(ctx.recipe, role, "toy") if ctx.recipe.roles else "toy"


@register_engine(AtomEngine)
class Atom(Engine):
    """AMD ATOM workers.  The launch command follows srt-slurm's fork; not verified on hardware."""

    health_path = None  # not verified on hardware: name a probe

    launches = frozenset({"direct"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(KV_EVENTS,), leader=(HTTP,), per_role={"prefill": (BOOTSTRAP,)})

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        port = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        argv = ["python3", "-m", "atom.entrypoints.openai_server", "--model", ctx.model_path]
        argv += ["--host", "0.0.0.0", "--server-port", str(port)]
        return argv + self.role_flags(ctx, role, {"node": proc.node})


@register_engine(TileRTEngine)
class TileRT(Engine):
    """TileRT decode workers.  The launch command follows upstream's example; not verified on hardware."""

    health_path = None  # not verified on hardware: name a probe

    launches = frozenset({"direct"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(leader=(HTTP,))

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        port = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        argv = ["python3", "-m", "tilert.serve", "--host", "0.0.0.0", "--port", str(port)]
        return argv + self.role_flags(ctx, role, {"node": proc.node})
