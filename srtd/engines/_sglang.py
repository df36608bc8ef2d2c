"""The SGLang row: `sglang.launch_server` or `dynamo.sglang`, its sidecar, KV events and endpoints."""

from __future__ import annotations

import json
from typing import Any

from srtd.context import PlanContext
from srtd.engines._base import Engine, WorkerMode, disagg_mode, dynamo_worker_flags, need_port, register_engine
from srtd.engines._sidecar import supervised_pair
from srtd.recipe import EngineConfig, Recipe, SGLangEngine
from srtd.services import LMCACHE_SERVER
from srtd.topology import (
    BOOTSTRAP,
    DIST_INIT,
    HTTP,
    KV_EVENTS,
    KV_REPLAY,
    LOAD_PUBLISH,
    NCCL,
    NIXL,
    SIDECAR_GRPC,
    SYS,
    PortKind,
    PortPlan,
    Process,
)


def _sidecar(recipe: Recipe, role: str) -> bool:
    own = recipe.roles[role].sidecar
    return own if own is not None else recipe.dynamo.sidecar


def _runs_sidecar(ctx: PlanContext, role: str, proc: Process) -> bool:
    # The leader registers the worker; other nodes need one only to publish their KV events.
    return proc.is_leader or bool(ctx.recipe.roles[role].kv_events)


def _auto_endpoints(recipe: Recipe, role: str) -> list[PortKind]:
    """Port kinds for the SGLang endpoints a role leaves to srtd (`auto`)."""
    cfg = recipe.roles[role]
    kinds = []
    if cfg.args.get("load-publish-endpoint") == "auto":
        kinds.append(LOAD_PUBLISH)
    if isinstance(cfg.kv_events, dict) and cfg.kv_events.get("replay_endpoint") == "auto":
        kinds.append(KV_REPLAY)
    return kinds


def _kv_events_config(ctx: PlanContext, role: str, proc: Process) -> str | None:
    """`--kv-events-config` for a role with `kv_events`: ZMQ on the process's own port."""
    spec = ctx.recipe.roles[role].kv_events
    if not spec or "kv_events" not in proc.ports:
        return None
    # srtctl's key order (defaults, the recipe's keys, the endpoint), so the flag reads as srtctl's does
    config: dict[str, Any] = {"publisher": "zmq", "topic": "kv-events"}
    if isinstance(spec, dict):
        config.update(spec)
        if config.get("replay_endpoint") == "auto":
            config["replay_endpoint"] = f"tcp://*:{need_port(proc, KV_REPLAY)}"
    config.setdefault("endpoint", f"tcp://*:{proc.ports['kv_events']}")
    return json.dumps(config)


def _leader(ctx: PlanContext, proc: Process) -> Process:
    endpoint = proc.endpoint
    return next(p for p in ctx.processes_of(endpoint) if p.is_leader)


def _multi_node(ctx: PlanContext, proc: Process) -> list[str]:
    endpoint = proc.endpoint
    if len(endpoint.nodes) == 1:
        return []
    leader = _leader(ctx, proc)
    addr = f"{ctx.address(leader.node)}:{need_port(leader, DIST_INIT)}"
    return ["--dist-init-addr", addr, "--nnodes", str(len(endpoint.nodes)), "--node-rank", str(proc.node_rank)]


@register_engine(SGLangEngine)
class SGLang(Engine):
    health_path = "/health"  # sglang.launch_server and the Dynamo system port
    torch_profiler_dir_env = "SGLANG_TORCH_PROFILER_DIR"
    served_flag = "--served-model-name"
    memory_fraction_flag = "--mem-fraction-static"
    owned_flags = frozenset({"port", "host", "model-path", "disaggregation-mode", "nccl-port", "dist-init-addr"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        # SGLang publishes KV events from every data-parallel rank, on consecutive ports
        dp = recipe.roles[role].args.get("data-parallel-size", recipe.roles[role].args.get("dp-size", 1))
        every: tuple[PortKind, ...] = (SYS, KV_EVENTS, NIXL, NCCL, DIST_INIT)
        if _sidecar(recipe, role):
            every += (SIDECAR_GRPC,)
        ranks = int(dp) if isinstance(dp, int) and dp > 1 else 1
        sizes = {KV_EVENTS.name: ranks}
        # `auto` endpoints get ports of their own, one per data-parallel rank like the KV events
        for kind in _auto_endpoints(recipe, role):
            every += (kind,)
            sizes[kind.name] = ranks
        return PortPlan(every=every, leader=(HTTP,), per_role={"prefill": (BOOTSTRAP,)}, sizes=sizes)

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        sidecar = mode.via_dynamo and _sidecar(ctx.recipe, role)
        native = not mode.via_dynamo or sidecar
        module = "sglang.launch_server" if native else "dynamo.sglang"
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports.get("http")
        argv = ["python3", "-m", module, "--model-path", ctx.model_path]
        argv += ["--served-model-name", self.served_model_name(ctx, role), "--host", "0.0.0.0"]
        if http or sidecar:
            argv += ["--port", str(http or 0)]  # a sidecar's non-leader engines serve no HTTP
        argv += ["--nccl-port", str(need_port(proc, NCCL))]
        args = ctx.recipe.roles[role].args
        if "enable-metrics" not in args and not sidecar:
            argv.append("--enable-metrics")
        if mode.via_dynamo and not sidecar:
            argv += dynamo_worker_flags(ctx, proc)
        if mode.disaggregated:
            argv += disagg_mode(role)
            if native and "skip-server-warmup" not in args:
                # A router (or sidecar) sends real traffic only once both sides are up; the
                # warmup request of a lone prefill or decode server would hang.
                argv.append("--skip-server-warmup")
        bootstrap = _leader(ctx, proc).ports.get("bootstrap") if role == "prefill" else None
        if bootstrap is not None:
            # every node of a prefill worker names the leader's bootstrap port
            argv += ["--disaggregation-bootstrap-port", str(bootstrap)]
        argv += _multi_node(ctx, proc)
        pair = sidecar and _runs_sidecar(ctx, role, proc)
        if pair:
            argv += ["--grpc-port", str(need_port(proc, SIDECAR_GRPC))]
        events = _kv_events_config(ctx, role, proc)
        if events is not None:
            argv += ["--kv-events-config", events]
        if sidecar:
            argv.append("--incremental-streaming-output")  # the sidecar streams token deltas
        flags = self.role_flags(ctx, role, {"node": proc.node})
        if "load_publish" in proc.ports:
            flags = _replace_value(flags, "--load-publish-endpoint", f"tcp://*:{proc.ports['load_publish']}")
        argv += flags
        if not pair:
            return argv
        grpc = need_port(proc, SIDECAR_GRPC)
        dyn = ctx.recipe.dynamo
        side = [dyn.sidecar_binary] if dyn.sidecar_binary else ["python3", "-m", "dynamo.sglang.sidecar"]
        side += ["--grpc-endpoint", f"127.0.0.1:{grpc}"]
        if role == "prefill" and proc.is_leader:
            side += ["--bootstrap-host", ctx.address(proc.node)]  # decode pulls KV from here
        if dyn.sidecar_context_length:
            side += ["--context-length", str(dyn.sidecar_context_length)]
        side += list(dyn.sidecar_args)
        return supervised_pair(argv, side, grpc_port=grpc, timeout=dyn.sidecar_startup_timeout)

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        # SGLang otherwise dumps a core / py-spy trace for 60 s after SIGTERM
        env = {"SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0", "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0"}
        if mode.via_dynamo and _sidecar(ctx.recipe, role):
            env["SGLANG_RUST_BUILD_MODE"] = "never"  # the image's prebuilt gRPC server, no rebuild at start
        args = ctx.recipe.roles[role].args
        server = ctx.node_services.get(LMCACHE_SERVER, {}).get(proc.node)
        if server is not None and (args.get("enable-lmcache") or args.get("enable_lmcache")):
            # SGLang's LMCache runs in multiprocess mode against the server on its own node (shared memory:
            # the same host), as srtctl points it
            env["LMCACHE_MP_HOST"] = "127.0.0.1"
            env["LMCACHE_MP_PORT"] = str(server["rpc"])
        return env


def _replace_value(argv: list[str], flag: str, value: str) -> list[str]:
    """The argv with the value after `flag` replaced."""
    out = list(argv)
    if flag in out and out.index(flag) + 1 < len(out):
        out[out.index(flag) + 1] = value
    return out
