"""The dependency graph: phase barriers, explicit `after:` edges, cycles, start order."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from dataclasses import replace

from srtd.errors import PlanError
from srtd.unit import Condition, Edge, Unit, UnitKind

PHASES = ("infra", "before_workers", "workers", "frontend", "after_frontend", "benchmark")


def _barrier(units: Sequence[Unit], phase: str) -> list[Unit]:
    """The units a later phase waits for: everything of the phase except one-shot builds."""
    return [u for u in units if u.phase == phase and u.kind is not UnitKind.BUILD]


def with_phase_edges(units: Sequence[Unit]) -> list[Unit]:
    """Each unit waits for every unit of the nearest earlier phase that has any.

    Workers are waited for as `started` by the frontend (it counts them itself
    through its gate); everything else is waited for as `ready`.  One-shot builds
    start at once: only their own service waits for them.
    """
    barriers = {phase: _barrier(units, phase) for phase in PHASES}  # once, not once per unit
    out = []
    for unit in units:
        if unit.kind is UnitKind.BUILD:
            out.append(unit)
            continue
        index = PHASES.index(unit.phase)
        edges = list(unit.after)
        for earlier in reversed(PHASES[:index]):
            barrier = barriers[earlier]
            if not barrier:
                continue
            condition = Condition.STARTED if earlier == "workers" and unit.phase == "frontend" else Condition.READY
            # a row may already wait for a unit of the barrier (the benchmark for the frontend)
            edges += [e for e in (Edge(unit=b.name, condition=condition) for b in barrier) if e not in edges]
            break
        out.append(replace(unit, after=tuple(edges)))
    return out


def with_explicit_edges(units: Sequence[Unit], wanted: dict[str, tuple[str, ...]], services: set[str]) -> list[Unit]:
    """Add `after: [names]` of services: wait until every instance of each named service is ready.

    `wanted` maps a service name to the names it waits for; `services` is every
    effective service.  Units of a service are named `service_<name>` or
    `service_<name>_<...>`.
    """
    problems = []
    for name, targets in wanted.items():
        for target in targets:
            if target not in services:
                known = ", ".join(sorted(services)) or "none"
                problems.append(f"service {name!r} waits for {target!r}, which is not a service of this job ({known})")
    if problems:
        raise PlanError(problems)
    owners = {u.name: service_of(u, services) for u in units}
    out = []
    for unit in units:
        owner = owners[unit.name]
        if owner is None or owner not in wanted or unit.kind is UnitKind.BUILD:
            out.append(unit)
            continue
        extra = [
            Edge(unit=u.name, condition=Condition.READY)
            for target in wanted[owner]
            for u in units
            if owners[u.name] == target and u.kind is not UnitKind.BUILD
        ]
        out.append(replace(unit, after=(*extra, *unit.after)))
    return out


def service_of(unit: Unit, services: Collection[str]) -> str | None:
    """The service a unit belongs to, or None for workers, frontends and the benchmark."""
    if unit.kind not in (UnitKind.SERVICE, UnitKind.BUILD) or not unit.name.startswith("service_"):
        return None
    rest = unit.name[len("service_") :].split(".")[0]
    # the longest service name that prefixes the rest (names may contain '_')
    best = None
    for name in services:
        if (rest == name or rest.startswith(name + "_")) and (best is None or len(name) > len(best)):
            best = name
    return best


def start_order(units: Sequence[Unit]) -> list[Unit]:
    """A topological order, stable with respect to the given order; cycles are errors naming them."""
    by_name = {u.name: u for u in units}
    for unit in units:
        for edge in unit.after:
            if edge.unit not in by_name:
                raise PlanError(f"{unit.name} waits for {edge.unit!r}, which is not a unit of this plan")
    cycle = find_cycle(units)
    if cycle:
        raise PlanError(f"dependency cycle: {' -> '.join(cycle)}")
    position = {u.name: i for i, u in enumerate(units)}
    waiting = {u.name: len({e.unit for e in u.after}) for u in units}
    dependants: dict[str, list[str]] = {u.name: [] for u in units}
    for unit in units:
        for dep in {e.unit for e in unit.after}:
            dependants[dep].append(unit.name)
    ready = [position[u.name] for u in units if waiting[u.name] == 0]
    heapq.heapify(ready)
    order: list[Unit] = []
    while ready:
        unit = units[heapq.heappop(ready)]
        order.append(unit)
        for name in dependants[unit.name]:
            waiting[name] -= 1
            if waiting[name] == 0:
                heapq.heappush(ready, position[name])
    return order


def find_cycle(units: Sequence[Unit]) -> list[str] | None:
    deps = {u.name: [e.unit for e in u.after] for u in units}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for dep in deps.get(name, []):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if state.get(dep) is None:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[name] = 2
        return None

    for unit in units:
        if unit.name not in state:
            found = visit(unit.name)
            if found:
                # shown in the direction things wait: a waits for b waits for ... a
                return found
    return None
