"""Who a replacement touches: a pure decision over the plan before and after it.

When a node is lost and a spare is left, `replace_node` gives the plan with the lost
node's units on the spare and its address replaced everywhere it was written.  The diff
of the two plans and the graph then say, for every unit, one of:

- **moved**: it was placed on the lost node; it is launched again on the spare (same
  name, a new attempt, same GPUs and ports);
- **restarted**: it is elsewhere, but what it was launched with changed (its argv, env or
  preamble held the lost node's name or address: a static worker list, an `SRT_*`
  address variable, the master address of a multi-node endpoint's other ranks), or it
  reads a generated file whose text changed (an nginx upstream list), or it shares a
  group (one multi-node endpoint) with a moved unit; it is stopped and launched again
  with the new launch line once its dependencies are ready again;
- **disrupted**: a terminal unit (the benchmark) that neither moves nor restarts for its
  own sake: what it measured may have crossed the disruption, so the runtime restarts it
  (or fails the job) per `benchmark.on_disruption` if it was running;
- **kept**: everything else, in particular a unit that finds its workers through
  discovery (a Dynamo frontend through etcd): its launch line did not change.

No name is compared: only placements, launch lines, files and edges.  `order` lists the
moved and restarted units in dependency order (a unit after every unit it waits for),
which is the order in which they come back.
"""

from __future__ import annotations

from srtd._value import value_class
from srtd.unit import Plan, Unit


@value_class
class Replacement:
    lost: str
    spare: str
    plan: Plan  # the plan after the replacement
    moved: tuple[str, ...]
    restarted: tuple[str, ...]
    disrupted: tuple[str, ...]
    kept: tuple[str, ...]
    order: tuple[str, ...]  # moved + restarted, dependencies first

    @property
    def touched(self) -> tuple[str, ...]:
        return self.moved + self.restarted


def _launch_text(unit: Unit) -> str:
    return "\0".join((*unit.argv, unit.preamble or "", *unit.env.values(), *unit.srun.export_env.values()))


def _reads(unit: Unit, paths: set[str]) -> bool:
    text = _launch_text(unit)
    return any(path in text for path in paths)


def _dependency_order(plan: Plan, names: set[str]) -> tuple[str, ...]:
    """`names` in an order where every unit comes after the ones of `names` it depends on
    (directly or through others); ties keep the plan's start order.  The plan has no cycles."""
    index = {u.name: i for i, u in enumerate(plan.units)}
    deps = {u.name: {e.unit for e in u.after} for u in plan.units}
    memo: dict[str, set[str]] = {}

    def upstream(name: str) -> set[str]:
        if name not in memo:
            memo[name] = set()
            for dep in deps.get(name, ()):
                memo[name] |= {dep} | upstream(dep)
        return memo[name]

    ordered: list[str] = []
    pending = sorted(names, key=index.__getitem__)
    while pending:
        ready = next(n for n in pending if not (upstream(n) & set(pending) - {n}))
        ordered.append(ready)
        pending.remove(ready)
    return tuple(ordered)


def decide(before: Plan, after: Plan, lost: str, spare: str) -> Replacement:
    """Classify every unit of `before` (see the module docstring).  `after` is `before` with
    `lost` replaced by `spare`: the same units, in the same order."""
    new = {u.name: u for u in after.units}
    changed_files = {path for path, text in before.files.items() if after.files.get(path) != text}
    moved = [u for u in before.units if lost in u.nodes and not u.on_teardown]
    moved_groups = {u.group for u in moved if u.group is not None}
    restarted = [
        u
        for u in before.units
        if u not in moved
        and not u.on_teardown
        and (
            _launch_text(u) != _launch_text(new[u.name])
            or _reads(u, changed_files)
            or (u.group is not None and u.group in moved_groups)
        )
    ]
    touched = {u.name for u in moved + restarted}
    disrupted = [u.name for u in before.units if u.terminal and u.name not in touched and not u.on_teardown]
    kept = [u.name for u in before.units if u.name not in touched and u.name not in disrupted]
    return Replacement(
        lost=lost,
        spare=spare,
        plan=after,
        moved=tuple(u.name for u in moved),
        restarted=tuple(u.name for u in restarted),
        disrupted=tuple(disrupted),
        kept=tuple(kept),
        order=_dependency_order(before, touched),
    )


def choose_spare(plan: Plan, lost: str, gone: set[str]) -> str | None:
    """The first spare that is not lost itself; None when the lost node cannot be replaced:
    no spare left, or it is the node srtd runs on (the allocation's first: the batch step)."""
    if plan.allocation and lost == plan.allocation[0]:
        return None
    return next((s for s in plan.spares if s not in gone and s != lost), None)
