"""Rewrite the keys older than `engine:` in memory, until `srtd migrate` lands.

Some upstream example versions still carry schema 1 keys next to `schema: 2`
(`backend:`, `resources.agg_nodes`, `dynamo.version`, ...).  The fidelity test
compares launches, not spellings, so it rewrites exactly those keys here.
"""

from __future__ import annotations

import copy
from typing import Any

_MODES = {"aggregated": "agg", "agg": "agg", "prefill": "prefill", "decode": "decode"}
_RESOURCES = {"nodes": "{}_nodes", "workers": "{}_workers", "gpus": "gpus_per_{}"}


def rewrite_pre_engine_keys(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    roles: dict[str, dict[str, Any]] = data.setdefault("roles", {}) or {}
    data["roles"] = roles
    backend = data.pop("backend", None)
    if isinstance(backend, dict):
        engine: dict[str, Any] = {}
        for key, value in backend.items():
            if key.endswith("_environment") and key.removesuffix("_environment") in _MODES:
                role = _MODES[key.removesuffix("_environment")]
                roles.setdefault(role, {}).setdefault("env", {}).update(value)
            elif key.endswith("_config") and isinstance(value, dict) and set(value) <= set(_MODES):
                for mode, args in value.items():
                    roles.setdefault(_MODES[mode], {}).setdefault("args", {}).update(args or {})
            else:
                engine[key] = value
        data["engine"] = engine
    resources = data.get("resources") or {}
    for role in ("prefill", "decode", "agg"):
        for field, old in _RESOURCES.items():
            key = old.format(role)
            if key in resources:
                roles.setdefault(role, {})[field] = resources.pop(key)
    dynamo = data.get("dynamo") or {}
    if "version" in dynamo:
        dynamo.setdefault("source", {})["pypi"] = str(dynamo.pop("version"))
    engine_cfg = data.get("engine")
    if isinstance(engine_cfg, dict) and "set_cuda_visible_devices" in engine_cfg:
        engine_cfg["set_visible_devices"] = engine_cfg.pop("set_cuda_visible_devices")
    _router_spelling(data, roles)
    if not roles:
        data.pop("roles")
    return data


def _router_spelling(data: dict[str, Any], roles: dict[str, dict[str, Any]]) -> None:
    # Before the `-router` frontend types, `frontend.type: sglang` / `vllm` in front of
    # several workers meant the engine's router; now the bare name is one direct worker.
    frontend = data.get("frontend") or {}
    if frontend.get("type") not in ("sglang", "vllm"):
        return
    workers = sum(int(r.get("workers") or 1) for r in roles.values())
    if workers > 1 or "prefill" in roles:
        frontend["type"] = f"{frontend['type']}-router"
