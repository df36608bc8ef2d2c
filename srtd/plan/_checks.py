"""The plan's checks that need the whole graph: unique unit names, `after:` targets, cycles, ports.

Each problem points at the recipe entry to change (`services.N.after.M`, `options.port`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from srtd._yaml import dotted, walk
from srtd.context import PlanContext
from srtd.errors import PlanError, Problem
from srtd.plan._graph import find_cycle, service_of
from srtd.recipe import Recipe
from srtd.services import EffectiveService
from srtd.topology import PORT_LIMIT
from srtd.unit import Unit


def _owner(unit: Unit, services: Sequence[EffectiveService]) -> EffectiveService | None:
    name = service_of(unit, [s.name for s in services])
    return next((s for s in services if s.name == name), None)


def check_unique_names(units: Sequence[Unit], services: Sequence[EffectiveService]) -> None:
    seen: set[str] = set()
    for unit in units:
        if unit.name in seen:
            owner = _owner(unit, services)
            path = f"{owner.path}.name" if owner is not None and owner.position is not None else ""
            raise PlanError(Problem(f"two units are named {unit.name!r}; rename one of the services", path=path))
        seen.add(unit.name)


def check_after(recipe: Recipe, kept: Sequence[EffectiveService], every: Sequence[EffectiveService]) -> None:
    """Every `after:` entry names a service this plan runs; each one that does not is a mistake."""
    names = {s.name for s in kept}
    left_out = {s.name for s in every} - names
    disabled = {s.name: i for i, s in enumerate(recipe.services) if not s.enabled}
    problems = []
    for eff in kept:
        if eff.position is None:
            continue
        for j, target in enumerate(eff.config.after):
            if target in names:
                continue
            if target in disabled:
                why = f"which is disabled (services.{disabled[target]} has enabled: false)"
            elif target in left_out:
                why = "which is left out of this plan (see the warnings)"
            else:
                why = f"which is not a service of this job ({', '.join(sorted(names)) or 'none'})"
            problems.append(Problem(f"service {eff.name!r} waits for {target!r}, {why}", path=f"{eff.path}.after.{j}"))
    if problems:
        raise PlanError(problems)


def cycle_problem(units: Sequence[Unit], services: Sequence[EffectiveService]) -> list[Problem]:
    """The first dependency cycle, pinned to the first `after:` entry on it."""
    cycle = find_cycle(units)
    if not cycle:
        return []
    by_name = {u.name: u for u in units}
    path = ""
    for waiter, waited in itertools.pairwise(cycle):
        owner = _owner(by_name[waiter], services)
        target = _owner(by_name[waited], services)
        if owner is None or owner.position is None or target is None or target.name not in owner.config.after:
            continue
        path = f"{owner.path}.after.{owner.config.after.index(target.name)}"
        break
    return [Problem(f"dependency cycle: {' -> '.join(cycle)}", path=path)]


def _port_path(eff: EffectiveService, port: int) -> str:
    """Where a service's port is written: `options.port`, a `port` under `readiness`, or the entry."""
    if eff.position is None:
        return ""
    if eff.config.options.get("port") == port:
        return f"{eff.path}.options.port"
    if eff.config.readiness is not None:
        for rel, value in walk(eff.config.readiness.model_dump(by_alias=True, exclude_defaults=True)):
            if rel and rel[-1] == "port" and value == port:
                return f"{eff.path}.readiness.{dotted(rel)}"
    return eff.path


def port_problems(ctx: PlanContext, units: Sequence[Unit], services: Sequence[EffectiveService]) -> list[Problem]:
    """Ports past 65535 and ports two units listen on; one mistake repeated on every node is said once."""
    owners: dict[tuple[str, int], Unit] = {}
    found: dict[tuple[str, int, str], list[Problem]] = {}  # (path, port, kind) -> the same mistake everywhere
    for unit in units:
        for port in dict.fromkeys(unit.ports.values()):
            if port >= PORT_LIMIT:
                problem = Problem(f"{unit.name}: port {port} is past 65535 (port offset {ctx.port_offset})")
                found.setdefault(("", 0, "past"), []).append(problem)
            key = ("" if ctx.shared_ports else unit.node, port)
            other = owners.get(key)
            if other is not None and other.name != unit.name:
                where = unit.node
                if ctx.local:
                    where = "this machine (local mode: every node is this one)"
                elif ctx.shared_ports:
                    where = "the shared port space (the nodes share one host)"
                # blame the service that was written later (or the only service of the two)
                service = _owner(unit, services) or _owner(other, services)
                path = _port_path(service, port) if service is not None else ""
                problem = Problem(f"port {port} on {where}: both {other.name} and {unit.name} listen on it", path=path)
                found.setdefault((path, port, "clash"), []).append(problem)
            owners.setdefault(key, unit)
    return [_said_once(same) for same in found.values()]


def _said_once(same: list[Problem]) -> Problem:
    if len(same) == 1:
        return same[0]
    return replace(same[0], message=f"{same[0].message} (and {len(same) - 1} more like it)")
