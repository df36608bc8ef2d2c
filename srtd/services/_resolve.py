"""Which services a job runs: the implied ones, then the declared ones, and their rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from srtd._registry import unknown_name
from srtd._value import value_class
from srtd.context import PlanContext
from srtd.recipe import Recipe, ServiceConfig
from srtd.services._kind import PHASE_TIER, ServiceKind, get_kind, kind_names
from srtd.services._mooncake import TRTLLM_POOL_OPTIONS, trtllm_pool
from srtd.services._telemetry import telemetry_exporter_service, telemetry_problems


class ImpliesServices(Protocol):
    """A registry row (frontend, engine) that brings services of its own."""

    def implied_services(self, recipe: Recipe) -> list[tuple[dict[str, Any], str]]:
        """(service entry as recipe data, reason) for each service it implies."""
        ...


@value_class
class EffectiveService:
    """A service the job runs, with its kind's defaults applied."""

    config: ServiceConfig
    kind: ServiceKind
    implied_by: str | None = None
    position: int | None = None  # index in `services:` when declared

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def path(self) -> str:
        return f"services.{self.position}" if self.position is not None else f"services[{self.name}]"

    @property
    def start(self) -> str:
        return self.config.start or self.kind.default_start

    @property
    def critical(self) -> bool:
        return self.kind.default_critical if self.config.critical is None else self.config.critical

    @property
    def placement(self) -> str:
        if self.config.nodes is not None:
            return "workers"
        return self.config.placement_node or self.kind.default_placement

    @property
    def per(self) -> str:
        placement = self.config.placement
        if placement is not None and "per" in placement.model_fields_set:
            return placement.per
        return self.kind.default_per

    @property
    def pool(self) -> str | None:
        """The pool this service runs on: its own when it owns nodes, or the one it rides."""
        if self.config.nodes is not None:
            return self.name
        return self.config.placement.pool if self.config.placement else None

    @property
    def tier(self) -> int:
        return self.kind.tier if self.kind.tier is not None else PHASE_TIER[self.start]

    @property
    def external(self) -> str | None:
        return self.config.external


def _implied(recipe: Recipe, rows: Iterable[ImpliesServices], local: bool) -> list[tuple[ServiceConfig, str]]:
    out: list[tuple[ServiceConfig, str]] = []
    for row in rows:
        for data, reason in row.implied_services(recipe):
            out.append((ServiceConfig.model_validate(data), reason))
    power = telemetry_exporter_service(recipe)
    if power is not None and not local:
        out.append((ServiceConfig.model_validate(power[0]), power[1]))
    tachometer = recipe.observability.tachometer
    if tachometer.on and tachometer.default_exporters and not local:
        exporters = [("node-exporter", "node-exporter"), ("process-exporter", "process-exporter")]
        if not recipe.telemetry.enabled:  # power telemetry brings its own DCGM exporter
            exporters.insert(0, ("dcgm-exporter", "dcgm-exporter"))
        for name, kind in exporters:
            out.append((ServiceConfig(name=name, type=kind), "the metrics scraper (observability.tachometer)"))
    if tachometer.on and not local:
        out.append((ServiceConfig(name="tachometer", type="tachometer"), "observability.tachometer"))
    return out


# Newer srt-slurm service features srtd knowingly does not support yet (docs/recipe.md).
_NOT_YET = "that srtd does not support yet; see docs/recipe.md"
# (Empty today: every service type and option of the reference snapshots is built.)
NEWER_KINDS: dict[str, str] = {}
NEWER_OPTIONS: dict[tuple[str, str], str] = {}


def effective_services(
    recipe: Recipe, rows: Iterable[ImpliesServices], *, local: bool = False
) -> list[EffectiveService]:
    """Implied services first (a declared entry of the same name takes its place, `enabled: false`
    drops it), then the remaining declared ones in declaration order.  Unknown kinds are skipped
    here; `service_problems` reports them."""
    declared = {s.name: (i, s) for i, s in enumerate(recipe.services)}
    out: list[EffectiveService] = []
    taken: set[str] = set()
    for config, reason in _implied(recipe, rows, local):
        if config.name in taken:
            continue
        taken.add(config.name)
        if config.name in declared:
            position, own = declared[config.name]
            kind = get_kind(own.type)
            if own.enabled and kind is not None:
                out.append(EffectiveService(own, kind, None, position))
            continue
        kind = get_kind(config.type)
        if kind is not None:
            out.append(EffectiveService(config, kind, reason))
    for position, config in enumerate(recipe.services):
        if config.name in taken or not config.enabled:
            continue
        taken.add(config.name)
        kind = get_kind(config.type)
        if kind is not None:
            out.append(EffectiveService(config, kind, None, position))
    return out


def services_client_env(ctx: PlanContext, services: Iterable[EffectiveService]) -> dict[str, str]:
    """What the running services tell the benchmark client (the recipe's own env wins over it)."""
    out: dict[str, str] = {}
    for eff in services:
        if eff.external is None:
            out.update(eff.kind.client_env(ctx, eff.config))
    return out


def service_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """The rules of the services doc that need to know the kinds: (path, message)."""
    problems: list[tuple[str, str]] = []
    masters = []
    dedicated: dict[str, bool] = {}
    for i, svc in enumerate(recipe.services):
        path = f"services.{i}"
        kind = get_kind(svc.type)
        if kind is None:
            newer = NEWER_KINDS.get(svc.type)
            if newer is not None:
                problems.append(
                    (f"{path}.type", f"{svc.type!r} ({newer}) is a newer srt-slurm service type {_NOT_YET}")
                )
            else:
                problems.append((f"{path}.type", unknown_name("service type", svc.type, kind_names())))
            continue
        problems.extend(_entry_problems(path, svc, kind))
        if svc.enabled and kind.kv_master:
            masters.append(i)
        if svc.enabled and kind.supports_dedicated and not kind.kv_master:
            dedicated[svc.name] = svc.placement_node == "dedicated"
    if len(masters) > 1:
        problems.append((f"services.{masters[1]}", "only one mooncake-master per job"))
    stores = _enabled(recipe, lambda kind: kind.needs_kv_master)
    if stores and not masters:
        problems.append((f"services.{stores[0]}.type", "mooncake-store needs a mooncake-master entry"))
    problems.extend(_donor_problems(recipe, masters))
    problems.extend(telemetry_problems(recipe))
    if len(set(dedicated.values())) > 1:
        names = ", ".join(f"{n}={'dedicated' if d else 'not dedicated'}" for n, d in dedicated.items())
        problems.append(("services", f"etcd and nats share the infra node: both dedicated or neither ({names})"))
    return problems


def _entry_problems(path: str, svc: ServiceConfig, kind: ServiceKind) -> list[tuple[str, str]]:
    """One entry's rules against its kind: command, placement, external, options, per-worker."""
    problems: list[tuple[str, str]] = []
    if kind.needs_command and svc.command is None and svc.external is None:
        problems.append((f"{path}.command", f"a {kind.name} service needs a `command`"))
    node = svc.placement_node
    if node == "dedicated" and not kind.supports_dedicated:
        problems.append((f"{path}.placement.node", f"{kind.name} cannot take a dedicated node"))
    elif node is not None and kind.placements is not None and node not in kind.placements:
        allowed = ", ".join(sorted(kind.placements))
        problems.append((f"{path}.placement.node", f"{kind.name} runs on {allowed}, not {node!r}"))
    if svc.external is not None and not kind.supports_external:
        problems.append((f"{path}.external", f"{kind.name} cannot be external; only etcd, nats, mooncake-master"))
    for key in svc.options:
        if key not in kind.option_keys:
            known = ", ".join(sorted(kind.option_keys)) or "none"
            newer = NEWER_OPTIONS.get((kind.name, key))
            message = (
                f"a newer srt-slurm option of {kind.name} ({newer}) {_NOT_YET}"
                if newer
                else f"unknown option for {kind.name} (known: {known})"
            )
            problems.append((f"{path}.options.{key}", message))
    problems.extend((f"{path}.{rel}", msg) for rel, msg in kind.validate(svc))
    per = svc.placement.per if svc.placement is not None else kind.default_per
    placed = node or kind.default_placement
    if per == "worker" and node is None and placed not in ("prefill", "decode", "agg", "workers"):
        problems.append(
            (
                f"{path}.placement.per",
                f"`per: worker` needs placement.node prefill, decode, agg or workers; "
                f"{kind.name} runs on {placed!r} unless told otherwise",
            )
        )
    return problems


def _enabled(recipe: Recipe, which: Callable[[ServiceKind], bool]) -> list[int]:
    """The indices of the enabled services whose kind is `which`."""
    found = []
    for i, svc in enumerate(recipe.services):
        kind = get_kind(svc.type)
        if svc.enabled and kind is not None and which(kind):
            found.append(i)
    return found


def _donor_problems(recipe: Recipe, masters: list[int]) -> list[tuple[str, str]]:
    """A donor lends memory to TRT-LLM's pool: it needs that master (pool options set)."""
    donors = _enabled(recipe, lambda kind: kind.lends_to_pool)
    if not donors or (masters and trtllm_pool(recipe.services[masters[0]])):
        return []
    wanted = ", ".join(sorted(TRTLLM_POOL_OPTIONS))
    message = f"mooncake-donor needs a mooncake-master with TRT-LLM pool options ({wanted})"
    return [(f"services.{donors[0]}.type", message)]
