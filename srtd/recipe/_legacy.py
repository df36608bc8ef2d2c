"""Keys of the schema 1 layout, and what schema 2 writes instead.

Some upstream files were written between the two layouts and still carry a
schema 1 key next to `schema: 2`.  The loader refuses them like any unknown key,
and this table adds which schema 2 field replaced the key.
"""

from __future__ import annotations

import re

# (dotted path pattern, replacement); `<role>` in a replacement is filled from
# the key (`prefill_nodes` -> `roles.prefill.nodes`).
_REPLACED: tuple[tuple[str, str], ...] = (
    (r"backend", "`engine` (the engine type and knobs) and `roles.<role>.args` / `roles.<role>.env`"),
    (
        r"infra",
        "`services` entries of type etcd / nats (`placement.node: dedicated`, `options.max_payload_mb`)",
    ),
    (r"auxiliary_services", "`services`"),
    (r"kv_events_config", "`roles.<role>.kv_events`"),
    (r"resources\.(prefill|decode|agg)_nodes", "`roles.{0}.nodes`"),
    (r"resources\.(prefill|decode|agg)_workers", "`roles.{0}.workers`"),
    (r"resources\.gpus_per_(prefill|decode|agg)", "`roles.{0}.gpus`"),
    (r"resources\.(prefill|decode|agg)_critical", "`roles.{0}.critical`"),
    (r"resources\.etcd_nats_dedicated_node", "`services` etcd / nats with `placement.node: dedicated`"),
    (r"dynamo\.version", "`dynamo.source.pypi`"),
    (r"dynamo\.hash", "`dynamo.source.rev`"),
    (r"dynamo\.wheel", "`dynamo.source.wheel`"),
    (r"dynamo\.cargo_patches", "`dynamo.source.patches`"),
    (r"frontend\.(orchestrator_placement|dedicated_node)", "`frontend.placement.node`"),
    (r"benchmark\.(client_placement|client_dedicated_node)", "`benchmark.placement.node`"),
    (r"roles\.(prefill|decode|agg)\.(environment|env_vars)", "`roles.{0}.env`"),
)

_ROLE_NAMES = ("prefill", "decode", "agg")


def replacement_for(path: str) -> str | None:
    """The schema 2 field that replaced the schema 1 key at `path`, if it is one."""
    for pattern, replacement in _REPLACED:
        match = re.fullmatch(pattern, path)
        if match:
            groups = [g for g in match.groups() if g in _ROLE_NAMES]
            return replacement.format(*groups) if groups else replacement
    return None


# Older keys srtctl stopped reading (it accepts and ignores them): `srtd migrate` drops them,
# so the migrated file launches what srtctl launches for the file as written.
_IGNORED: tuple[tuple[str, str], ...] = (
    (
        r"engine\.set_cuda_visible_devices",
        "GPUs go by --device-ids; `engine.set_visible_devices: true` pins them by environment",
    ),
)


def ignored_by_srtctl(path: str) -> str | None:
    """What srtctl does instead, for an older key it no longer reads."""
    for pattern, instead in _IGNORED:
        if re.fullmatch(pattern, path):
            return instead
    return None


# Newer srt-slurm fields srtd knowingly does not support yet (docs/recipe.md,
# "Newer srt-slurm fields"): the error says so instead of suggesting a typo.
# (Empty today: every newer field of the reference snapshots is read.)
NOT_SUPPORTED_YET: tuple[tuple[str, str], ...] = ()


def newer_field(path: str) -> str | None:
    """What a newer srt-slurm field at `path` does, if srtd knowingly leaves it unsupported."""
    for pattern, what in NOT_SUPPORTED_YET:
        if re.fullmatch(pattern, path):
            return what
    return None


def legacy_hint(path: str) -> str | None:
    newer = newer_field(path)
    if newer is not None:
        return f"a newer srt-slurm field ({newer}) that srtd does not support yet; see docs/recipe.md"
    ignored = ignored_by_srtctl(path)
    if ignored is not None:
        return f"an older srt-slurm key srtctl no longer reads ({ignored}); `srtd migrate` drops it"
    replacement = replacement_for(path)
    if replacement is None:
        return None
    return f"an older srt-slurm key; schema 2 writes {replacement} (`srtd migrate` rewrites it)"
