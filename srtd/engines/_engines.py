"""The engine rows: how each engine's worker is launched."""

from __future__ import annotations

import json
import posixpath
from typing import Any

from srtd.context import PlanContext, render
from srtd.engines._base import (
    DIRECT_LAUNCH,
    DYNAMO_LAUNCH,
    Engine,
    WorkerMode,
    dynamo_worker_flags,
    need_port,
    register_engine,
)
from srtd.engines._sidecar import supervised_pair
from srtd.engines._trtllm_pool import dynamo_entry, pool_env, pool_preamble
from srtd.recipe import (
    AtomEngine,
    CustomEngine,
    EngineConfig,
    LivenessSpec,
    MockerEngine,
    Recipe,
    SGLangEngine,
    TileRTEngine,
    TokenSpeedEngine,
    ToyEngine,
    TRTLLMEngine,
    VLLMEngine,
)
from srtd.services import LMCACHE_RPC_PORT, LMCACHE_SERVER
from srtd.topology import (
    BOOTSTRAP,
    DIST_INIT,
    GRPC,
    HTTP,
    KV_EVENTS,
    KV_REPLAY,
    LOAD_PUBLISH,
    MORIIO_HANDSHAKE,
    MORIIO_NOTIFY,
    NCCL,
    NIXL,
    SIDECAR_GRPC,
    SYS,
    TRTLLM_DIST_INIT,
    VLLM_SCAN,
    PortKind,
    PortPlan,
    Process,
)
from srtd.unit import FileProbe, HttpProbe, LogProbe, Readiness, Srun, TcpProbe, WorkerCountProbe


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


def _disagg_mode(role: str) -> list[str]:
    return ["--disaggregation-mode", role] if role in ("prefill", "decode") else []


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
            argv += _disagg_mode(role)
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


_LMCACHE_MP = {
    "kv_connector": "LMCacheMPConnector",
    "kv_connector_module_path": "lmcache.integration.vllm.lmcache_mp_connector",
    "kv_role": "kv_both",
}
_VLLM_CONNECTORS: dict[str, dict[str, Any]] = {
    "nixl": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
    "lmcache": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
    "lmcache-mp": _LMCACHE_MP,
    "kvbm": {"kv_connector": "DynamoConnector", "kv_role": "kv_both"},
    "moriio": {"kv_connector": "MoRIIOConnector", "kv_role": "kv_both"},
}
MORIIO_DISCOVERY_PORT = 36367  # vllm-router's MoRIIO discovery listener


def _connector(recipe: Recipe, cfg: EngineConfig, role: str) -> str | None:
    own = recipe.roles[role].args.get("connector")
    if isinstance(own, str):
        return own
    return cfg.connector if isinstance(cfg, VLLMEngine) else None


def kv_connector(recipe: Recipe, role: str) -> str | None:
    """The vLLM KV connector a role uses (None: not a vLLM role, or none)."""
    cfg = recipe.engine_for(role) if role in recipe.roles else None
    return _connector(recipe, cfg, role) if cfg is not None else None


@register_engine(VLLMEngine)
class VLLM(Engine):
    health_path = "/health"  # vllm serve and the Dynamo system port
    torch_profiler_dir_env = "VLLM_TORCH_PROFILER_DIR"
    served_flag = "--served-model-name"
    owned_flags = frozenset({"port", "host", "model", "disaggregation-mode", "kv-transfer-config-from-connector"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        cfg = recipe.engine_for(role)
        moriio = cfg is not None and _connector(recipe, cfg, role) == "moriio"
        leader = (HTTP, MORIIO_HANDSHAKE, MORIIO_NOTIFY) if moriio else (HTTP,)
        return PortPlan(every=(SYS, KV_EVENTS, NIXL, VLLM_SCAN), leader=leader)

    def connector(self, ctx: PlanContext, cfg: EngineConfig, role: str) -> str | None:
        return _connector(ctx.recipe, cfg, role)

    def kv_transfer_config(
        self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode
    ) -> str | None:
        """The `--kv-transfer-config` JSON for the role's connector (None: no KV connector)."""
        connector = self.connector(ctx, cfg, role)
        if not connector:
            return None
        if connector.lstrip().startswith("{"):
            return connector  # raw JSON, as written
        if connector == "moriio":
            return json.dumps(self._moriio(ctx, role, proc, mode))
        if connector == "lmcache-mp":
            lmcache = {**_LMCACHE_MP, "kv_connector_extra_config": _lmcache_mp_endpoint(ctx)}
            if mode.disaggregated:
                # KV moves prefill -> decode over NIXL; LMCache keeps the prefix cache.
                both = {"connectors": [_VLLM_CONNECTORS["nixl"], lmcache]}
                multi = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": both}
                return json.dumps(multi, separators=(",", ":"))
            return json.dumps(lmcache)
        known = _VLLM_CONNECTORS.get(connector)
        if known is None:
            return connector
        if not mode.via_dynamo and not mode.disaggregated:
            return None  # a lone `vllm serve` moves no KV
        return json.dumps(known)

    def _moriio(self, ctx: PlanContext, role: str, proc: Process, mode: WorkerMode) -> dict[str, Any]:
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports.get("http")
        return {
            "kv_connector": "MoRIIOConnector",
            "kv_role": {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role, "kv_both"),
            "kv_connector_extra_config": {
                "proxy_ip": ctx.address(ctx.nodes.head),
                "proxy_ping_port": str(ctx.port(MORIIO_DISCOVERY_PORT)),
                "http_port": str(http),
                "host_ip": ctx.address(proc.node),
                "handshake_port": str(need_port(proc, MORIIO_HANDSHAKE)),
                "notify_port": str(need_port(proc, MORIIO_NOTIFY)),
                "read_mode": True,
            },
        }

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports.get("http")
        served = self.served_model_name(ctx, role)
        if mode.via_dynamo:
            argv = ["python3", "-m", "dynamo.vllm", "--model", ctx.model_path, "--served-model-name", served]
            if mode.disaggregated:
                argv += _disagg_mode(role)
        else:
            binary = cfg.vllm_serve_binary if isinstance(cfg, VLLMEngine) else "vllm"
            argv = [binary, "serve", ctx.model_path, "--host", "0.0.0.0"]
            if http:
                argv += ["--port", str(http)]
            argv += ["--served-model-name", served]
        if "kv-transfer-config" not in ctx.recipe.roles[role].args:
            kv = self.kv_transfer_config(ctx, cfg, role, proc, mode)
            if kv is not None:
                argv += ["--kv-transfer-config", kv]
        if not self._visible_devices(cfg):
            argv += ["--device-ids", proc.visible_devices]
        if mode.via_dynamo:
            argv += dynamo_worker_flags(ctx, proc)
        flags = self.role_flags(ctx, role, {"node": proc.node})
        return argv + _drop_flag(flags, "--connector")

    def _visible_devices(self, cfg: EngineConfig) -> bool:
        return isinstance(cfg, VLLMEngine) and cfg.set_visible_devices

    def visible_devices_env(self, ctx: PlanContext, cfg: EngineConfig) -> bool:
        # vLLM picks its GPUs with --device-ids unless the recipe asks for the variable.
        return self._visible_devices(cfg)

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        env: dict[str, str] = {}
        if mode.via_dynamo:
            env["DYN_HEALTH_CHECK_ENABLED"] = "false"  # srtd probes /health itself
        if "kv_events" in proc.ports:
            env["DYN_VLLM_KV_EVENT_PORT"] = str(proc.ports["kv_events"])
        connector = self.connector(ctx, cfg, role) or ""
        if mode.via_dynamo or "nixl" in connector:
            if "vllm_scan" in proc.ports:
                env["VLLM_PORT"] = str(proc.ports["vllm_scan"])
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
                    {"name": LMCACHE_SERVER, "type": LMCACHE_SERVER, "placement": {"node": node}},
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


def _replace_value(argv: list[str], flag: str, value: str) -> list[str]:
    """The argv with the value after `flag` replaced."""
    out = list(argv)
    if flag in out and out.index(flag) + 1 < len(out):
        out[out.index(flag) + 1] = value
    return out


def _lmcache_mp_endpoint(ctx: PlanContext) -> dict[str, Any]:
    return {"lmcache.mp.host": "tcp://localhost", "lmcache.mp.port": ctx.port(LMCACHE_RPC_PORT)}


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

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(SYS, KV_EVENTS, NIXL), leader=(HTTP, TRTLLM_DIST_INIT))

    def config_file(self, ctx: PlanContext, role: str, *, in_step: bool) -> str:
        root = ctx.logs_path if in_step else ctx.log_dir
        return posixpath.join(root, f"trtllm_config_{role}.yaml")

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        served = self.served_model_name(ctx, role)
        config = self.config_file(ctx, role, in_step=True)
        args = ctx.recipe.roles[role].args
        # TRT-LLM reads a role's args from a YAML file, not from flags.
        ctx.files[self.config_file(ctx, role, in_step=False)] = dump_yaml(dict(args))
        # Every rank of the MPI step starts through the launcher, one GPU or many.
        argv = [*self.numa_wrapper(cfg), "trtllm-llmapi-launch"]
        if mode.via_dynamo:
            argv += [*dynamo_entry(ctx, role, config), "--model-path", ctx.model_path, "--served-model-name", served]
            argv += _disagg_mode(role) if mode.disaggregated else []
            argv += ["--extra-engine-args", config, *dynamo_worker_flags(ctx, proc, dump_config=False)]
            if isinstance(cfg, TRTLLMEngine):
                if cfg.publish_events_and_metrics:
                    argv.append("--publish-events-and-metrics")
                elif cfg.publish_metrics:
                    argv.append("--publish-metrics")
            return argv + list(ctx.recipe.roles[role].extra_args)
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        tp = args.get("tensor_parallel_size", proc.endpoint.gpu_count)
        argv += ["trtllm-serve", ctx.model_path, "--host", "0.0.0.0", "--port", str(http)]
        argv += ["--tensor_parallel_size", str(tp), "--config", config, "--served_model_name", served]
        return argv + list(ctx.recipe.roles[role].extra_args)

    def numa_wrapper(self, cfg: EngineConfig) -> list[str]:
        """srt-slurm's NUMA script in /configs, when the recipe binds memory or CPUs to the GPU's node."""
        if not isinstance(cfg, TRTLLMEngine) or not (cfg.numa_memory_bind or cfg.numa_cpu_bind):
            return []
        wrapper = ["bash", "/configs/numa_cpu_bind.sh"]
        if cfg.numa_memory_bind:
            wrapper.append("--bind-memory")
        if not cfg.numa_cpu_bind:
            wrapper.append("--no-bind-cpu")
        return wrapper

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        endpoint = proc.endpoint
        env = {
            # torch.distributed rendezvous of the endpoint's ranks, unique per endpoint
            "MASTER_ADDR": ctx.address(endpoint.nodes[0]),
            "MASTER_PORT": str(need_port(proc, TRTLLM_DIST_INIT)),
            # the expert-load-balancer's shared memory segment must not collide between endpoints
            "TRTLLM_EPLB_SHM_NAME": f"srtd_eplb_{ctx.job_id}_{role}_{endpoint.index}",
        }
        if isinstance(cfg, TRTLLMEngine) and cfg.numa_cpu_bind:
            env["TLLM_NUMA_AWARE_WORKER_AFFINITY"] = "0"  # the wrapper pins CPUs; TRT-LLM must not re-pin
        return {**env, **pool_env(ctx, role)}

    def role_preamble(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process) -> str | None:
        return pool_preamble(ctx, role, proc)

    def srun(self, ctx: PlanContext, cfg: EngineConfig, role: str, endpoint: Any) -> Srun:
        base = super().srun(ctx, cfg, role, endpoint)
        options = {**base.options, "kill-on-bad-exit": "1", "ntasks-per-node": str(len(endpoint.gpus))}
        if len(endpoint.nodes) > 1:
            # one host per rank in srtd's node order, so rank 0 runs where MASTER_ADDR points (as srtctl does)
            options["distribution"] = "arbitrary"
        return Srun(
            ntasks=endpoint.gpu_count,
            mpi="pmix",
            oversubscribe=True,
            cpu_bind="verbose,none",
            options=options,
        )

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        ready = super().readiness(ctx, cfg, proc, mode)
        if ready is None or not mode.via_dynamo:
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
        argv += _disagg_mode(role) if mode.disaggregated else []
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
