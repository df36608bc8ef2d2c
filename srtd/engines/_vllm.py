"""The vLLM row: `vllm serve` or `dynamo.vllm`, and the KV connector each role names."""

from __future__ import annotations

import json
from typing import Any

from srtd.context import PlanContext
from srtd.engines._base import Engine, WorkerMode, disagg_mode, dynamo_worker_flags, need_port, register_engine
from srtd.recipe import EngineConfig, Recipe, VLLMEngine
from srtd.services import LMCACHE_RPC_PORT, LMCACHE_SERVER
from srtd.topology import HTTP, KV_EVENTS, MORIIO_HANDSHAKE, MORIIO_NOTIFY, NIXL, SYS, VLLM_SCAN, PortPlan, Process

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
