"""A spare node taking over from a failing or lost one: `replace_node`, a pure function of the plan.

Every unit placed on the lost node moves to the spare with the same GPUs, ports and roles.
Wherever the plan wrote the lost node down for another process to read (argv, environment,
the preamble, probes, generated files, the rendered srun lines) the spare is written
instead: its address where the lost node's address stood, its name where the bare name
stood.  The lost node stays in the allocation (Slurm still counts it) but leaves every role.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from srtd.unit import LogProbe, Plan, Readiness, Unit


def _swapper(plan: Plan, lost: str, spare: str) -> tuple[re.Pattern[str], dict[str, str]]:
    # The address first: a node's address may contain its name (`node1.cluster`).
    pairs = {plan.addresses.get(lost, lost): plan.addresses.get(spare, spare), lost: spare}
    words = sorted(pairs, key=len, reverse=True)
    # A whole name only: node1 is not a part of node10, 10.0.0.1 not a part of 10.0.0.12.
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(w) for w in words) + r")(?![\w-])")
    return pattern, pairs


def replace_node(plan: Plan, lost: str, spare: str) -> Plan:
    """The plan with `spare` doing everything `lost` did; `spare` leaves `plan.spares`.

    Raises `ValueError` for a spare the plan does not hold or a node it does not know: the
    caller (preflight, the lost-node handler) decides what a missing spare means.
    """
    if spare not in plan.spares:
        raise ValueError(f"{spare} is not a spare node of the plan (spares: {', '.join(plan.spares) or 'none'})")
    if lost not in plan.allocation:
        raise ValueError(f"{lost} is not a node of the allocation")
    pattern, pairs = _swapper(plan, lost, spare)

    def text(value: str) -> str:
        return pattern.sub(lambda m: pairs[m.group(1)], value)

    def values(mapping: Mapping[str, str]) -> dict[str, str]:
        return {key: text(value) for key, value in mapping.items()}

    def gate(ready: Readiness | None) -> Readiness | None:
        if ready is None or isinstance(ready.probe, LogProbe) or ready.probe.node != lost:
            return ready
        return replace(ready, probe=replace(ready.probe, node=spare))

    def move(unit: Unit) -> Unit:
        liveness = unit.liveness
        probe = None if liveness is None else liveness.probe
        if liveness is not None and probe is not None and not isinstance(probe, LogProbe) and probe.node == lost:
            liveness = replace(liveness, probe=replace(probe, node=spare))
        return replace(
            unit,
            nodes=tuple(spare if n == lost else n for n in unit.nodes),
            argv=tuple(text(a) for a in unit.argv),
            env=values(unit.env),
            preamble=None if unit.preamble is None else text(unit.preamble),
            srun=replace(unit.srun, export_env=values(unit.srun.export_env)),
            readiness=gate(unit.readiness),
            liveness=liveness,
        )

    power = plan.power
    if power is not None:
        endpoints = tuple(replace(e, node=spare, url=text(e.url)) if e.node == lost else e for e in power.endpoints)
        power = replace(power, endpoints=endpoints)
    return replace(
        plan,
        nodes={role: tuple(spare if n == lost else n for n in names) for role, names in plan.nodes.items()},
        units=tuple(move(u) for u in plan.units),
        files=values(plan.files),
        srun_lines=values(plan.srun_lines),
        spares=tuple(n for n in plan.spares if n != spare),
        power=power,
    )
