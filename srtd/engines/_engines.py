"""The smaller engine rows: Dynamo's mocker, custom, toy, TokenSpeed, ATOM and TileRT."""

from __future__ import annotations

import json
from typing import Any

from srtd.context import PlanContext, render
from srtd.engines._base import DIRECT_LAUNCH, DYNAMO_LAUNCH, Engine, WorkerMode, disagg_mode, need_port, register_engine
from srtd.recipe import (
    AtomEngine,
    CustomEngine,
    EngineConfig,
    LivenessSpec,
    MockerEngine,
    Recipe,
    TileRTEngine,
    TokenSpeedEngine,
    ToyEngine,
)
from srtd.topology import BOOTSTRAP, DIST_INIT, GRPC, HTTP, KV_EVENTS, NIXL, SYS, PortPlan, Process
from srtd.unit import FileProbe, HttpProbe, LogProbe, Readiness, TcpProbe, WorkerCountProbe

# Dynamo's Rust runtime: a panicked tokio task can leave the process up with its engine
# gone ("thread 'tokio-runtime-worker' panicked at lib/...rs:L:C:"), so the line is the
# only sign.
DYNAMO_FATAL = (r"thread '[^']*' panicked at ",)


@register_engine(MockerEngine)
class Mocker(Engine):
    """Dynamo's simulated engine (`python3 -m dynamo.mocker`), checked against ai-dynamo 1.6.1."""

    health_path = "/health"  # the Dynamo system port

    launches = frozenset({DYNAMO_LAUNCH})
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
        argv += ["--engine-type", cfg.engine_type, "--speedup-ratio", str(float(cfg.speedup_ratio))]
        if cfg.decode_speedup_ratio != 1.0:
            argv += ["--decode-speedup-ratio", str(float(cfg.decode_speedup_ratio))]
        argv += ["--data-parallel-size", str(cfg.data_parallel_size)]
        argv += ["--num-gpu-blocks-override", str(cfg.num_gpu_blocks_override)]
        argv += ["--max-num-seqs", str(cfg.max_num_seqs)]
        argv += ["--max-num-batched-tokens", str(cfg.max_num_batched_tokens)]
        if cfg.block_size is not None:
            argv += ["--block-size", str(cfg.block_size)]
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
        argv += disagg_mode(role) if mode.disaggregated else []
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

    launches = frozenset({DIRECT_LAUNCH})

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
        if ready is None or isinstance(ready.probe, WorkerCountProbe | FileProbe):
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

    launches = frozenset({DIRECT_LAUNCH})
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


@register_engine(TokenSpeedEngine)
class TokenSpeed(Engine):
    """TokenSpeed: one process per node, a gRPC endpoint on the leader (`smg` routes to it)."""

    served_flag = "--served-model-name"
    owned_flags = frozenset({"model", "host", "port", "dist-init-addr", "nnodes", "node-rank"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(SYS, DIST_INIT), leader=(GRPC,), per_role={"prefill": (BOOTSTRAP,)})

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        module = "dynamo.tokenspeed" if mode.via_dynamo else "smg_grpc_servicer.tokenspeed"
        endpoint = proc.endpoint
        leader = next(p for p in ctx.processes_of(endpoint) if p.is_leader)
        argv = ["python3", "-m", module, "--model", ctx.model_path]
        argv += ["--served-model-name", self.served_model_name(ctx, role)]
        # gRPC on the node's own address: only the router (or Dynamo) talks to it
        argv += ["--host", ctx.address(proc.node), "--port", str(need_port(leader, GRPC))]
        argv += ["--dist-init-addr", f"{ctx.address(leader.node)}:{need_port(leader, DIST_INIT)}"]
        argv += ["--nnodes", str(len(endpoint.nodes)), "--node-rank", str(proc.node_rank)]
        argv += disagg_mode(role) if mode.disaggregated else []
        if role == "prefill" and "bootstrap" in proc.ports:
            argv += ["--disaggregation-bootstrap-port", str(proc.ports["bootstrap"])]
        return argv + self.role_flags(ctx, role, {"node": proc.node})

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        # a lone prefill or decode server's warmup request would wait for its peer
        return {"TOKENSPEED_SKIP_GRPC_WARMUP": "1"} if mode.disaggregated else {}

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        if mode.via_dynamo or not proc.is_leader:
            return super().readiness(ctx, cfg, proc, mode)
        check = ctx.recipe.health_check
        return Readiness(
            probe=TcpProbe(node=proc.node, port=need_port(proc, GRPC)),
            timeout_seconds=float(check.max_attempts * check.interval_seconds),
            interval_seconds=float(check.interval_seconds),
        )


@register_engine(AtomEngine)
class Atom(Engine):
    """AMD ATOM workers.  The launch command follows srt-slurm; not verified on hardware."""

    health_path = None  # not verified on hardware: name a probe

    launches = frozenset({DIRECT_LAUNCH})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(KV_EVENTS, NIXL), leader=(HTTP,), per_role={"prefill": (BOOTSTRAP,)})

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        port = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        # ATOM reads the address it advertises for KV transfer from ATOM_HOST_IP
        argv = ["env", f"ATOM_HOST_IP={ctx.address(proc.node)}"]
        argv += ["python3", "-m", "atom.entrypoints.openai_server", "--model", ctx.model_path]
        argv += ["--host", "0.0.0.0", "--server-port", str(port), "-tp", str(proc.endpoint.gpu_count)]
        if mode.disaggregated and role in ("prefill", "decode"):
            transfer: dict[str, Any] = {
                "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
                "kv_connector": "mooncake",
                "proxy_ip": ctx.address(ctx.nodes.head),
                "handshake_port": need_port(proc, NIXL),
            }
            if isinstance(cfg, AtomEngine) and cfg.mooncake_protocol:
                transfer["protocol"] = cfg.mooncake_protocol
            argv += ["--kv-transfer-config", json.dumps(transfer, separators=(",", ":"))]
        return argv + self.role_flags(ctx, role, {"node": proc.node})

    def served_model_name(self, ctx: PlanContext, role: str) -> str:
        named = ctx.recipe.roles[role].args.get("served-model-name")
        return named if isinstance(named, str) else ctx.model_path  # ATOM serves the path it loaded


@register_engine(TileRTEngine)
class TileRT(Engine):
    """TileRT decode servers (a vLLM prefill feeds them).  Follows srt-slurm; not verified on hardware."""

    health_path = None  # not verified on hardware: name a probe

    launches = frozenset({DIRECT_LAUNCH})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(NIXL,), leader=(HTTP,))

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        port = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        argv = ["python3", "-m", "tilert.pd_vllm.decode_server", "--engine", "tilert"]
        # the control port is where the router and the prefill connector reach the decode server
        argv += ["--http-port", str(port), "--ctrl-port", str(need_port(proc, NIXL))]
        return argv + self.role_flags(ctx, role, {"node": proc.node})
