"""A lost node's units placed on a spare: the plan after a replacement.  Pure.

TEMPORARY copy (h-nodemove) of the contract's `replace_node` (issue #31): h-nodepre
writes the real one with its own tests; at the merge that one replaces this file.
"""

from __future__ import annotations

import re
from typing import Any

from srtd.unit import Plan, Unit

# A host name or address as a whole word: not inside a longer name (`node1` in `node12`,
# `10.0.0.1` in `10.0.0.12`); a domain after it (`node1.cluster`) is the same host.
_BEFORE = r"(?<![\w.-])"
_AFTER = r"(?![\w-])(?!\.\d)"


def _substitutions(plan: Plan, lost: str, spare: str) -> list[tuple[re.Pattern[str], str]]:
    pairs = {lost: spare}
    old, new = plan.addresses.get(lost), plan.addresses.get(spare)
    if old and new:
        pairs[old] = new
    return [(re.compile(_BEFORE + re.escape(a) + _AFTER), b) for a, b in pairs.items()]


def _swap(text: str, subs: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, new in subs:
        text = pattern.sub(new, text)
    return text


def _moved_probe(probe: Any, lost: str, spare: str) -> Any:
    if probe is not None and getattr(probe, "node", None) == lost:
        return probe.model_copy(update={"node": spare})
    return probe


def _replace_unit(unit: Unit, lost: str, spare: str, subs: list[tuple[re.Pattern[str], str]]) -> Unit:
    update: dict[str, Any] = {
        "nodes": tuple(spare if n == lost else n for n in unit.nodes),
        "argv": tuple(_swap(a, subs) for a in unit.argv),
        "env": {k: _swap(v, subs) for k, v in unit.env.items()},
        "preamble": _swap(unit.preamble, subs) if unit.preamble is not None else None,
        "srun": unit.srun.model_copy(
            update={"export_env": {k: _swap(v, subs) for k, v in unit.srun.export_env.items()}}
        ),
    }
    for gate in ("readiness", "liveness"):
        spec = getattr(unit, gate)
        if spec is not None:
            update[gate] = spec.model_copy(update={"probe": _moved_probe(spec.probe, lost, spare)})
    moved = unit.model_copy(update=update)
    return unit if moved == unit else moved


def replace_node(plan: Plan, lost: str, spare: str) -> Plan:
    """`plan` with every unit of `lost` on `spare` (same GPUs, ports, roles, names) and the lost
    node's name and address replaced by the spare's in every unit's argv, env and files.  `spare`
    leaves `spares`; `lost` leaves the roles but stays in `allocation`."""
    subs = _substitutions(plan, lost, spare)
    return plan.model_copy(
        update={
            "units": tuple(_replace_unit(u, lost, spare, subs) for u in plan.units),
            "files": {path: _swap(text, subs) for path, text in plan.files.items()},
            "nodes": {role: tuple(spare if n == lost else n for n in names) for role, names in plan.nodes.items()},
            "spares": tuple(n for n in plan.spares if n != spare),
        }
    )
