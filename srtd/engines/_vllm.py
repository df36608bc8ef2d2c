"""The vLLM row: `vllm serve` or `dynamo.vllm`, and the KV connector each role names."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

from srtd._value import value_class
from srtd.context import PlanContext
from srtd.engines._base import (
    Engine,
    WorkerMode,
    disagg_mode,
    dynamo_worker_flags,
    need_port,
    register_engine,
    restart_of,
)
from srtd.recipe import EngineConfig, Recipe, RoleConfig, VLLMEngine, VLLMFailover
from srtd.services import LMCACHE_RPC_PORT, LMCACHE_SERVER, gms_socket_dir
from srtd.topology import (
    HTTP,
    KV_EVENTS,
    MORIIO_HANDSHAKE,
    MORIIO_NOTIFY,
    NIXL,
    PORT_KINDS,
    SYS,
    VLLM_SCAN,
    Endpoint,
    PortPlan,
    Process,
)
from srtd.unit import Restart, RestartMode, Unit

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
    # the scheduler's and model runner's NVTX ranges; spawned (not forked) workers nsys can follow
    nsys_env = {"VLLM_NVTX_SCOPES_FOR_PROFILING": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    served_flag = "--served-model-name"
    memory_fraction_flag = "--gpu-memory-utilization"
    owned_flags = frozenset({"port", "host", "model", "disaggregation-mode", "kv-transfer-config-from-connector"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        cfg = recipe.engine_for(role)
        moriio = cfg is not None and _connector(recipe, cfg, role) == "moriio"
        leader = (HTTP, MORIIO_HANDSHAKE, MORIIO_NOTIFY) if moriio else (HTTP,)
        every = (SYS, KV_EVENTS, NIXL, VLLM_SCAN)
        failover = _failover(cfg)
        if failover is None:
            return PortPlan(every=every, leader=leader)
        # every engine of a worker binds its own listeners: one block of consecutive allocations
        engines = 1 + failover.shadow_engines
        return PortPlan(every=every, leader=leader, sizes={k.name: engines for k in (*every, *leader)})

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
                argv += disagg_mode(role)
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
            if _failover(cfg) is not None:
                argv += ["--load-format", "gms", "--gms-shadow-mode"]  # weights from the worker's GMS
            argv += _engine_dump_config(dynamo_worker_flags(ctx, proc), _engine_of(proc))
        flags = self.role_flags(ctx, role, {"node": proc.node})
        return argv + _drop_flag(flags, "--connector")

    def _visible_devices(self, cfg: EngineConfig) -> bool:
        # Failover engines number their GPUs as the worker's GMS servers do (from 0 under
        # the visible-devices variable), so they must see the same renumbered devices.
        return isinstance(cfg, VLLMEngine) and (cfg.set_visible_devices or cfg.failover is not None)

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
        if _failover(cfg) is not None:
            env.update(_failover_env(ctx, role, proc))
        return env

    # ------------------------------------------------------------------ shadow engine recovery

    def units(self, ctx: PlanContext, cfg: EngineConfig, role: str, endpoint: Endpoint, mode: WorkerMode) -> list[Unit]:
        failover = _failover(cfg)
        if failover is None:
            return super().units(ctx, cfg, role, endpoint, mode)
        procs = ctx.processes_of(endpoint)
        group = endpoint.label if len(procs) > 1 else None
        out = []
        for engine in range(1 + failover.shadow_engines):
            for proc in procs:
                unit = self._unit(ctx, cfg, role, _EngineProcess.of(proc, engine), mode, group)
                out.append(_as_engine(unit, engine, failover, ctx.recipe.roles[role]))
        return out

    def role_preamble(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process) -> str | None:
        if _failover(cfg) is None:
            return None
        # the engines' lock lives next to the GMS sockets; an engine may start before the sidecar made it
        return f"mkdir -p {shlex.quote(gms_socket_dir(ctx, role, proc.endpoint.index))}"

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


def _failover(cfg: EngineConfig | None) -> VLLMFailover | None:
    return cfg.failover if isinstance(cfg, VLLMEngine) else None


@value_class
class _EngineProcess(Process):
    """One engine of a failover worker: engine 0 serves first, 1.. are its standbys."""

    engine: int = 0

    @classmethod
    def of(cls, proc: Process, engine: int) -> _EngineProcess:
        # the worker's block holds one allocation per engine, `stride` apart
        ports = {k: p + engine * PORT_KINDS[k].stride for k, p in proc.ports.items()}
        return cls(proc.endpoint, proc.node, proc.node_rank, ports, engine)


def _engine_of(proc: Process) -> int:
    return proc.engine if isinstance(proc, _EngineProcess) else 0


def _suffix(engine: int) -> str:
    return f"_e{engine}" if engine else ""


def _engine_dump_config(flags: list[str], engine: int) -> list[str]:
    """A standby writes its resolved config beside engine 0's (`<node>_config_e1.json`)."""
    if not engine:
        return flags
    return [f.removesuffix(".json") + f"{_suffix(engine)}.json" if f.endswith("_config.json") else f for f in flags]


def _failover_env(ctx: PlanContext, role: str, proc: Process) -> dict[str, str]:
    directory = gms_socket_dir(ctx, role, proc.endpoint.index)
    return {
        "ENGINE_ID": str(_engine_of(proc)),  # 0 loads the weights into the GMS, the others map them
        "GMS_SOCKET_DIR": directory,
        "FAILOVER_LOCK_PATH": f"{directory}/failover.lock",  # the engine holding it serves
        "DYN_VLLM_GMS_SHADOW_MODE": "true",
        "DYN_SYSTEM_STARTING_HEALTH_STATUS": "notready",
    }


def _as_engine(unit: Unit, engine: int, failover: VLLMFailover, role: RoleConfig) -> Unit:
    """One engine unit of a failover worker: its own name and log, restarted in place by policy.

    No readiness or liveness probe: a standby's /health says `notready` by design, and
    after a takeover any engine may be the standby.  The frontend's worker count gates
    the benchmark instead (only the serving engine registers).
    """
    suffix = _suffix(engine)
    log = unit.log.removesuffix(".out") + f"{suffix}.out" if unit.log.endswith(".out") else unit.log + suffix
    return replace(
        unit,
        name=unit.name + suffix,
        log=log,
        group=unit.group + suffix if unit.group else None,
        readiness=None,
        liveness=None,
        restart=failover_restart(failover, role),
    )


def failover_restart(failover: VLLMFailover, role: RoleConfig) -> Restart:
    """`restart: always` is srtd's `always` policy with a fixed delay; `never` keeps the role's policy."""
    if failover.restart == "never":
        return restart_of(role)
    delay = failover.restart_backoff_seconds
    return Restart(
        policy=RestartMode.ALWAYS,
        max_restarts=role.restart.max_restarts,
        backoff_seconds=delay,
        max_backoff_seconds=delay,  # the delay stays fixed: a cap equal to the base stops the doubling
        stable_seconds=max(60.0, 2 * delay),
    )


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
