"""The folds of `srtd migrate`: one function per schema 1 block, each rewriting the document in place
(the rules are listed in `_migrate`'s docstring)."""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from srtd._value import value_class
from srtd.recipe._legacy import ignored_by_srtctl
from srtd.recipe._yaml_edit import child_map, index_of, pop_key, put_key

ROLES = {"prefill": "prefill", "decode": "decode", "agg": "agg", "aggregated": "agg"}
RESOURCE_ROLE_KEY = re.compile(r"^(?:(prefill|decode|agg)_(nodes|workers|critical)|gpus_per_(prefill|decode|agg))$")
ENGINE_CONFIG_KEY = re.compile(r"^(\w+)_config$")
ROLE_KEY = re.compile(r"^(prefill|decode|aggregated|agg)_(environment|extra_args)$")
DYNAMO_SOURCE = {"hash": "rev", "version": "pypi", "wheel": "wheel", "cargo_patches": "patches"}
DYNAMO_GIT = "https://github.com/ai-dynamo/dynamo"


_RoleValue = tuple[str, str, Any, Any]  # (role, field, value, its comment)


@value_class(frozen=False)
class FoldContext:
    """What a block's fold needs to know about the rest of the file."""

    engine_type: str | None = None  # the base's, for override blocks that set engine knobs only
    roles: tuple[str, ...] = ()  # the roles of the base, for per-role copies in override blocks
    frontend: str | None = None
    notes: list[str] = field(default_factory=list)


def _role_entry(doc: CommentedMap, role: str, at: int | None) -> CommentedMap:
    return child_map(child_map(doc, "roles", at=at), role)


# --------------------------------------------------------------------------- the folds


def _fold_resources(doc: CommentedMap, ctx: FoldContext, *, partial: bool) -> None:
    resources = doc.get("resources")
    if not isinstance(resources, CommentedMap):
        return
    at = index_of(doc, "resources") + 1
    size = len(resources)
    for key in list(resources):
        match = RESOURCE_ROLE_KEY.match(str(key))
        if match:
            role = match.group(1) or match.group(3)
            what = {"nodes": "nodes", "workers": "workers", "critical": "critical"}.get(match.group(2) or "", "gpus")
            value, comment = pop_key(resources, key)
            if role == "decode" and what == "nodes":
                value = _colocate(value)
            entry = _role_entry(doc, role, at)
            put_key(entry, what, value, comment)
        elif key == "etcd_nats_dedicated_node":
            value, comment = pop_key(resources, key)
            _infra_services(doc, {"etcd_nats_dedicated_node": value}, comment, ctx, at=len(doc))
    if not resources and partial and len(resources) < size:
        pop_key(doc, "resources")  # an override block that only sized the roles


def _colocate(value: Any) -> Any:
    """`decode_nodes: 0` meant "on the prefill nodes"; zipped lists map item by item."""
    if isinstance(value, list):
        for i, item in enumerate(value):  # in place: the list keeps its style and comments
            value[i] = _colocate(item)
        return value
    if value == 0 and not isinstance(value, bool):
        return "colocate"
    return value


def _split_backend(backend: CommentedMap, ctx: FoldContext) -> tuple[Any, CommentedMap, list[_RoleValue], Any]:
    """(engine type, engine-wide knobs, per-role values, mooncake_kv_store) of a `backend` block."""
    engine_type = backend.get("type")
    knobs = CommentedMap()
    role_values: list[_RoleValue] = []
    store: tuple[Any, Any] | None = None
    for key in list(backend):
        value, comment = pop_key(backend, key)
        config = ENGINE_CONFIG_KEY.match(str(key))
        per_role = ROLE_KEY.match(str(key))
        if key == "type":
            continue
        if per_role:
            what = "env" if per_role.group(2) == "environment" else "extra_args"
            role_values.append((ROLES[per_role.group(1)], what, value, comment))
        elif key == "kv_events_config":
            role_values += _with_comment(_per_role(value, "kv_events", ctx), comment)
        elif config and isinstance(value, CommentedMap):
            engine_type = engine_type or config.group(1)
            role_values += _with_comment(_per_role(value, "args", ctx), comment)
            if value:
                knobs[key] = value  # not a role: named by the unknown-key check
        elif key == "mooncake_kv_store":
            store = (value, comment)
        else:
            put_key(knobs, key, value, comment)
    return engine_type, knobs, role_values, store


def _with_comment(values: list[_RoleValue], comment: Any) -> list[_RoleValue]:
    """A dissolved block's own comments go to the first value taken out of it."""
    if not values or comment is None:
        return values
    role, what, value, own = values[0]
    if own is None:
        own = comment
    else:
        own[1] = (comment[1] or []) + (own[1] or [])
        own[2] = own[2] or comment[2]
    return [(role, what, value, own), *values[1:]]


def _per_role(value: Any, what: str, ctx: FoldContext) -> list[_RoleValue]:
    """`{prefill: x, decode: y}` -> one value per role; a bare value goes to every role."""
    if not isinstance(value, CommentedMap):
        return [(r, what, value, None) for r in ctx.roles]
    out = []
    for mode in list(value):
        if str(mode) in ROLES:
            inner, inner_comment = pop_key(value, str(mode))
            out.append((ROLES[str(mode)], what, inner, inner_comment))
    return out


def _fold_backend(doc: CommentedMap, ctx: FoldContext, *, partial: bool) -> None:
    backend = doc.get("backend")
    if not isinstance(backend, CommentedMap):
        return
    if "engine" in doc:
        ctx.notes.append("backend: the recipe has an `engine` already; `backend` left for you to merge")
        return
    at = index_of(doc, "backend")
    backend_keys = set(backend)
    engine_type, knobs, role_values, store = _split_backend(backend, ctx)
    backend_comment = doc.ca.items.pop("backend", None)
    del doc["backend"]
    if partial and "type" not in backend_keys:
        engine_type = None  # the base names the engine; an override block only tunes it
    engine_type = engine_type or (None if partial else "sglang")
    if engine_type is None and knobs:
        engine_type = ctx.engine_type
    if knobs:
        engine: Any = CommentedMap([("type", engine_type)])
        for key in knobs:
            put_key(engine, key, knobs[key], knobs.ca.items.get(key))
    else:
        engine = engine_type
    if engine is not None:
        put_key(doc, "engine", engine, backend_comment, at=at)
        at += 1
        ctx.engine_type = ctx.engine_type or engine_type
    if "roles" in doc and index_of(doc, "roles") < at:
        # the roles (made from `resources`) follow the engine, where `backend` stood
        roles, roles_comment = pop_key(doc, "roles")
        at -= 1
        put_key(doc, "roles", roles, roles_comment, at=at)
    at = index_of(doc, "roles") + 1 if "roles" in doc else at
    for role, what, value, comment in role_values:
        entry = _role_entry(doc, role, at)
        if what == "env" and isinstance(entry.get("env"), dict) and isinstance(value, dict):
            for k in value:
                entry["env"][k] = value[k]
        else:
            put_key(entry, what, value, comment)
    if store is not None:
        _mooncake(doc, store[0], store[1], ctx)


def _mooncake(doc: CommentedMap, store: Any, comment: Any, ctx: FoldContext) -> None:
    """`backend.mooncake_kv_store` -> a mooncake-master service; its env goes to every role."""
    if not isinstance(store, dict):
        store = {}
    service = CommentedMap([("name", "mooncake-master"), ("type", "mooncake-master")])
    if store.get("container") is not None:
        service["container"] = store["container"]
    extra = store.get("master_extra_args")
    if extra:
        service["args"] = CommentedSeq(extra.split() if isinstance(extra, str) else list(extra))
    _services(doc).append(service)
    if comment is not None:
        doc.ca.items.setdefault("services", comment)
    env = store.get("env") or {}
    roles = doc.get("roles") or {}
    for role in list(roles) or list(ctx.roles):
        entry = child_map(child_map(doc, "roles"), role)
        target = entry.get("env") if isinstance(entry.get("env"), CommentedMap) else CommentedMap()
        for key, value in env.items():
            target.setdefault(key, value)
        if "env" not in entry:
            put_key(entry, "env", target)
    for key in store:
        if key not in ("container", "master_extra_args", "env"):
            ctx.notes.append(f"backend.mooncake_kv_store.{key}: no schema 2 field on the mooncake-master service; kept")
            service.setdefault("options", CommentedMap())[key] = store[key]


def _services(doc: CommentedMap) -> CommentedSeq:
    services = doc.get("services")
    if not isinstance(services, CommentedSeq):
        services = CommentedSeq()
        put_key(doc, "services", services)
    return services


def _fold_infra(doc: CommentedMap, ctx: FoldContext) -> None:
    infra = doc.get("infra")
    if not isinstance(infra, dict):
        return
    at = index_of(doc, "infra")
    value, comment = pop_key(doc, "infra")
    _infra_services(doc, value, comment, ctx, at=at)


def _infra_services(doc: CommentedMap, infra: Any, comment: Any, ctx: FoldContext, *, at: int) -> None:
    dedicated = infra.get("etcd_nats_dedicated_node")
    payload = infra.get("nats_max_payload_mb")
    placement = "dedicated" if dedicated else ("infra" if dedicated is False and ctx.roles else None)
    if placement is None and payload is None:
        ctx.notes.append("infra: etcd and nats on the head node is the default; nothing to write")
        return
    for key in infra:
        if key not in ("etcd_nats_dedicated_node", "nats_max_payload_mb"):
            ctx.notes.append(f"infra.{key}: no schema 2 field; dropped")
    entries = []
    for kind in ("etcd", "nats"):
        entry = CommentedMap([("name", kind), ("type", kind)])
        if placement is not None:
            entry["placement"] = CommentedMap([("node", placement)])
        if kind == "nats" and payload is not None:
            if ctx.frontend not in (None, "dynamo"):
                ctx.notes.append(
                    f"infra.nats_max_payload_mb: frontend {ctx.frontend!r} runs no NATS of Dynamo's; dropped"
                )
            else:
                entry["options"] = CommentedMap([("max_payload_mb", payload)])
        entries.append(entry)
    if "services" not in doc:
        put_key(doc, "services", CommentedSeq(), comment, at=at)
    elif comment is not None:
        doc.ca.items.setdefault("services", comment)
    services = doc["services"]
    names = {s.get("name") for s in services if isinstance(s, dict)}
    for entry in entries:
        if entry["name"] not in names:
            services.append(entry)
    if ctx.roles and placement == "infra":
        ctx.notes.append("infra in an override block: its services list replaces the base's, check it")


def _fold_dynamo(doc: CommentedMap, ctx: FoldContext) -> None:
    dynamo = doc.get("dynamo")
    if not isinstance(dynamo, CommentedMap):
        return
    for key in list(dynamo):
        if key in DYNAMO_SOURCE:
            value, comment = pop_key(dynamo, key)
            source = child_map(dynamo, "source")
            if key == "hash":
                source.setdefault("git", DYNAMO_GIT)
            put_key(source, DYNAMO_SOURCE[str(key)], value, comment)
        elif key == "sidecar":
            value, comment = pop_key(dynamo, key)
            roles = list(doc.get("roles") or ()) or list(ctx.roles)
            if not roles:
                put_key(dynamo, key, value, comment)  # no role to carry it; schema 2 still reads it here
                continue
            for role in roles:
                put_key(child_map(child_map(doc, "roles"), role), "sidecar", value)
            if comment is not None:
                doc["roles"].ca.items.setdefault(roles[0], comment)
    if dynamo.get("top_of_tree"):
        ctx.notes.append("dynamo.top_of_tree: left as written; pin a `dynamo.source` for repeatable runs")


def _fold_placement(doc: CommentedMap, section: str, fields: tuple[str, str]) -> None:
    """`<section>.{<placement>, <dedicated flag>}` -> `<section>.placement.node` (dedicated wins)."""
    node = doc.get(section)
    if not isinstance(node, CommentedMap) or not any(f in node for f in fields):
        return
    at = min(index_of(node, f) for f in fields if f in node)
    named, flag = fields
    where: Any = None
    comment = None
    if named in node:
        where, comment = pop_key(node, named)
    dedicated = False
    if flag in node:
        dedicated, flag_comment = pop_key(node, flag)
        comment = comment or flag_comment
    if dedicated:
        where = "dedicated"
    if where is None:
        return
    if isinstance(node.get("placement"), CommentedMap):
        put_key(node["placement"], "node", where, comment)
    else:
        placement = CommentedMap()
        put_key(placement, "node", where, comment)
        put_key(node, "placement", placement, at=at)


def _fold_auxiliary(doc: CommentedMap) -> None:
    if "auxiliary_services" not in doc:
        return
    at = index_of(doc, "auxiliary_services")
    value, comment = pop_key(doc, "auxiliary_services")
    if "services" in doc and isinstance(doc["services"], list):
        doc["services"].extend(value or [])
    else:
        put_key(doc, "services", value, comment, at=at)


def _fold_telemetry(doc: CommentedMap, ctx: FoldContext) -> None:
    """The old `telemetry: {provider: scraper}` block configured what is now `observability.tachometer`."""
    telemetry = doc.get("telemetry")
    if not isinstance(telemetry, CommentedMap) or telemetry.get("provider") != "scraper":
        return
    at = index_of(doc, "telemetry")
    value, comment = pop_key(doc, "telemetry")
    value.pop("provider")
    observability = child_map(doc, "observability", at=at)
    tachometer = child_map(observability, "tachometer")
    if "enabled" in value:
        enabled, enabled_comment = pop_key(value, "enabled")
        put_key(tachometer, "enabled", enabled, enabled_comment)
    if "default_frequency" in value:
        hertz, hertz_comment = pop_key(value, "default_frequency")
        if isinstance(hertz, int | float) and hertz > 0:
            put_key(tachometer, "collect_interval_ms", round(1000 / hertz), hertz_comment)
    for key in list(value):
        item, item_comment = pop_key(value, key)
        put_key(tachometer, key, item, item_comment)
    if comment is not None:
        observability.ca.items.setdefault("tachometer", comment)
    ctx.notes.append("telemetry (provider: scraper): moved to observability.tachometer")


def _fold_v2_leftovers(doc: CommentedMap, ctx: FoldContext) -> None:
    """Keys renamed inside schema 2 itself, and keys srtctl stopped reading."""
    engine = doc.get("engine")
    if isinstance(engine, CommentedMap) and "set_cuda_visible_devices" in engine:
        # srtctl accepts the old name and ignores it: dropping it keeps srtctl's launch
        pop_key(engine, "set_cuda_visible_devices")
        instead = ignored_by_srtctl("engine.set_cuda_visible_devices")
        ctx.notes.append(f"engine.set_cuda_visible_devices: dropped; srtctl no longer reads it ({instead})")
    roles = doc.get("roles")
    if isinstance(roles, CommentedMap):
        for role in roles.values():
            if not isinstance(role, CommentedMap):
                continue
            for old in ("environment", "env_vars"):
                if old in role and "env" not in role:
                    at = index_of(role, old)
                    value, comment = pop_key(role, old)
                    put_key(role, "env", value, comment, at=at)


def _colocated_gpus(doc: CommentedMap, ctx: FoldContext) -> None:
    """Colocated decode shared the prefill nodes' GPUs evenly among all workers when no
    `gpus_per_*` was written; schema 2 wants both roles' `gpus` stated."""
    roles = doc.get("roles")
    if not isinstance(roles, CommentedMap):
        return
    prefill, decode = roles.get("prefill"), roles.get("decode")
    if not isinstance(prefill, CommentedMap) or not isinstance(decode, CommentedMap):
        return
    if decode.get("nodes") != "colocate" or ("gpus" in prefill and "gpus" in decode):
        return
    resources = doc.get("resources") or {}
    counts = (prefill.get("nodes"), prefill.get("workers", 1), decode.get("workers", 1))
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return
    nodes, prefill_workers, decode_workers = counts
    share = nodes * resources.get("gpus_per_node", 4) // (prefill_workers + decode_workers)
    for name, entry in (("prefill", prefill), ("decode", decode)):
        if "gpus" not in entry:
            at = index_of(entry, "workers") + 1 if "workers" in entry else len(entry)
            put_key(entry, "gpus", share, at=at)
            ctx.notes.append(f"roles.{name}.gpus: {share}, the even share of the prefill nodes schema 1 used")


def _has_pre_engine_keys(doc: CommentedMap) -> bool:
    """`backend:` and no `engine:`: written before 2.0, whatever `schema:` says.  A block
    that has `engine:` speaks 2.0, even with a stray `resources.<role>_*` left in it."""
    return "backend" in doc and "engine" not in doc


def _fold_sglang_router(doc: CommentedMap, ctx: FoldContext, *, leftovers_only: bool) -> None:
    """Before 2.0, `frontend.type: sglang` was the SGLang router; 2.0 calls it `sglang-router`
    and gives `sglang` to the direct server."""
    frontend = doc.get("frontend")
    if not isinstance(frontend, CommentedMap) or frontend.get("type") != "sglang":
        return
    frontend["type"] = "sglang-router"
    if leftovers_only:  # a schema 1 file's reader expects the rename; a `schema: 2` file's may not
        ctx.notes.append(
            "frontend.type: sglang -> sglang-router; the file is written with `backend:` (before 2.0), "
            "when `sglang` meant the SGLang router"
        )


def fold(doc: CommentedMap, ctx: FoldContext, *, partial: bool, leftovers_only: bool) -> None:
    """Fold one recipe (or override block).  In a schema 2 file only the schema 1 keys it
    still carries are folded: values keep their schema 2 meaning (`frontend.type: sglang`
    is the direct server there, not the router), unless the block is written with `backend:`
    (before 2.0, whatever `schema:` says): then `sglang` is the router it meant then."""
    if not partial:
        frontend = doc.get("frontend")
        ctx.frontend = frontend.get("type", "dynamo") if isinstance(frontend, dict) else "dynamo"
    pre_engine = _has_pre_engine_keys(doc)
    _fold_resources(doc, ctx, partial=partial)
    _fold_infra(doc, ctx)
    _fold_backend(doc, ctx, partial=partial)
    _fold_dynamo(doc, ctx)
    _fold_placement(doc, "frontend", ("orchestrator_placement", "dedicated_node"))
    _fold_placement(doc, "benchmark", ("client_placement", "client_dedicated_node"))
    _fold_auxiliary(doc)
    _fold_v2_leftovers(doc, ctx)
    if not leftovers_only or pre_engine:
        _fold_sglang_router(doc, ctx, leftovers_only=leftovers_only)
    if leftovers_only:
        return
    _fold_telemetry(doc, ctx)
    if not partial:
        _colocated_gpus(doc, ctx)
