"""What preflight runs on each node, from the plan alone (srtd/supervisor/_preflight.py runs it).

Apart from the preflight itself, and light (the plan's types, nothing of the supervisor): a
saved plan run on this machine starts its check before the supervisor's modules are
imported (srtd/cli/_supervise.py, `LocalLauncher`'s early checks), so the first unit does
not wait for the check's interpreter to start.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path

from srtd._value import value_class
from srtd.unit import Plan, Unit, UnitKind

# Run by its path with `-I -S`: it needs nothing of srtd's and no site-packages, so it
# starts in half the time `-m` takes (9 ms against 20), and each job's start waits for it.
CHECK_PROGRAM = str(Path(__file__).resolve().parents[1] / "launch" / "_node_check.py")


@value_class
class Preflight:
    """How `srtd run` checks the nodes: the cluster's settings and the engines' memory flags."""

    budget_seconds: float = 60.0
    gpu_query: str = "nvidia-smi"
    memory_flags: tuple[str, ...] = ()
    python: str = field(default_factory=lambda: sys.executable)


@value_class
class NodeNeeds:
    gpus: tuple[int, ...]  # () with `gpu_check`: every GPU of the node
    ports: tuple[int, ...]
    fraction: float
    gpu_check: bool


def memory_fraction(argv: Sequence[str], flags: Sequence[str]) -> float:
    """The share of GPU memory `argv` asks for with one of `flags` (`--f 0.8` or `--f=0.8`); 0: none."""
    found = 0.0
    for i, word in enumerate(argv):
        for flag in flags:
            value = word[len(flag) + 1 :] if word.startswith(flag + "=") else None
            if word == flag and i + 1 < len(argv):
                value = argv[i + 1]
            try:
                found = max(found, float(value)) if value is not None else found
            except ValueError:
                continue
    return found


def _needs(units: Sequence[Unit], flags: Sequence[str]) -> NodeNeeds:
    workers = [u for u in units if u.kind is UnitKind.WORKER]
    whole = any(not u.gpus for u in workers)
    gpus = () if whole else tuple(sorted({g for u in workers for g in u.gpus}))
    ports = tuple(sorted({p for u in units for p in u.ports.values() if p}))
    fraction = max((memory_fraction(u.argv, flags) for u in workers), default=0.0)
    return NodeNeeds(gpus, ports, fraction, bool(workers))


def node_needs(plan: Plan, node: str, flags: Sequence[str]) -> NodeNeeds:
    """What the plan gives `node`; for a spare, what any node gives (it may take over any)."""
    if node in plan.spares:
        return _needs(plan.units, flags)
    return _needs([u for u in plan.units if node in u.nodes], flags)


def check_argv(settings: Preflight, plan: Plan, node: str) -> list[str]:
    needs = node_needs(plan, node, settings.memory_flags)
    return [
        settings.python,
        "-I",
        "-S",
        CHECK_PROGRAM,
        f"--node={node}",
        f"--log-dir={plan.log_dir}",
        f"--ports={','.join(map(str, needs.ports))}",
        f"--gpus={','.join(map(str, needs.gpus))}",
        f"--memory-fraction={needs.fraction:g}",
        f"--gpu-query={settings.gpu_query if needs.gpu_check else ''}",
    ]


def busy_nodes(plan: Plan) -> list[str]:
    """The allocation's nodes that carry units, in its order."""
    return [n for n in plan.allocation if any(n in u.nodes for u in plan.units)]


def nodes_to_check(plan: Plan) -> list[str]:
    """The nodes preflight checks: those the units run on, then the spares; none without preflight."""
    if not plan.preflight:
        return []
    return [*busy_nodes(plan), *plan.spares]


def node_checks(plan: Plan, settings: Preflight) -> list[list[str]]:
    """The argv of each node's check, in the order preflight runs them; none without preflight."""
    return [check_argv(settings, plan, node) for node in nodes_to_check(plan)]
