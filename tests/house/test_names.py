"""A name in a registry table is compared in its row and nowhere else (docs/architecture.md).

The test collects every registered name (engines, frontends, service kinds, benchmarks, results
readers) with the module that defines its row, then reads every module of srtd/ and fails on a
string literal of such a name in an `==`, `!=`, `in` or `not in` comparison outside that module.
Probe types (`tcp`, `http`, `log`, `file`, `workers`) are also the words of ports, schemes and
placements, so for them only a comparison with a `.type` counts (dispatch on a probe's kind).
Code that needs a row's behaviour asks the row (an attribute, a method) or uses the constant
the row registers under.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import srtd.unit
from srtd.benchmarks._rows import BENCHMARKS
from srtd.engines._base import ENGINES
from srtd.frontends._base import FRONTENDS
from srtd.results import READERS
from srtd.services._kind import KINDS

SRTD = Path(__file__).resolve().parents[2] / "srtd"

# Literals that spell a registered name but mean something else there, each with the reason.
NOT_A_ROW = {
    ("recipe/_migrate_folds.py", "sglang"): "schema 1's frontend type, rewritten as text before any row exists",
    ("recipe/_migrate_folds.py", "dynamo"): "schema 1's frontend type, read from the old layout's text",
    ("recipe/_migrate_folds.py", "nats"): "the schema 1 infra entry being written, not a kind being looked up",
    ("frontends/_frontends.py", "nats"): "the value of dynamo.request_plane / event_plane (a transport)",
    ("engines/_profiling.py", "none"): "profiling.type none: no explicit profiling (not the frontend row)",
    ("engines/_observe.py", "none"): "observability.nsys.cpu_sampling none: no CPU sampling (not the frontend row)",
}


def _module_of(obj: object) -> Path:
    source = inspect.getsourcefile(obj if inspect.isfunction(obj) or isinstance(obj, type) else type(obj))
    assert source is not None
    return Path(source).resolve()


def _probe_types() -> dict[str, Path]:
    return {tag: _module_of(spec.cls) for tag, spec in srtd.unit.PROBE.choices.items()}


def registered_names() -> dict[str, set[Path]]:
    """Each registered name -> the modules that define a row of that name."""
    rows: dict[str, set[Path]] = {}
    for registry in (ENGINES, FRONTENDS, KINDS, BENCHMARKS):
        for name in registry.names():
            rows.setdefault(name, set()).add(_module_of(registry.get(name)))
    for name, reader in READERS.items():
        rows.setdefault(name, set()).add(_module_of(reader))
    return rows


def _literals(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _literals(element)


def compared_names(
    relative: str, text: str, names: dict[str, set[Path]], allowed: Mapping[tuple[str, str], str]
) -> list[str]:
    """`srtd/file:line: 'name' in <comparison>` for each registered name the module `relative`
    (its source `text`) compares outside that name's row and not `allowed` there."""
    found = []
    probes = {name: {module} for name, module in _probe_types().items()}
    for node in ast.walk(ast.parse(text, relative)):
        if not isinstance(node, ast.Compare):
            continue
        if not all(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
            continue
        operands = (node.left, *node.comparators)
        on_type = any(isinstance(o, ast.Attribute) and o.attr == "type" for o in operands)
        for operand in operands:
            for name in _literals(operand):
                rows = names.get(name) or (probes.get(name) if on_type else None)
                if rows and SRTD / relative not in rows and (relative, name) not in allowed:
                    found.append(f"srtd/{relative}:{node.lineno}: {name!r} in {ast.unparse(node)}")
    return found


def _scan(relative: str, allowed: Mapping[tuple[str, str], str]) -> list[str]:
    return compared_names(relative, (SRTD / relative).read_text(encoding="utf-8"), registered_names(), allowed)


def test_the_registries_hold_the_names_this_test_looks_for() -> None:
    names = registered_names()
    assert {"sglang", "dynamo", "mooncake-master", "sa-bench", "rollup"} <= set(names)
    assert set(_probe_types()) == {"tcp", "http", "log", "file", "workers"}


def test_no_registered_name_is_compared_outside_its_row() -> None:
    modules = sorted(path.relative_to(SRTD).as_posix() for path in SRTD.rglob("*.py"))
    assert [line for relative in modules for line in _scan(relative, NOT_A_ROW)] == []


@pytest.mark.parametrize(("relative", "name"), sorted(NOT_A_ROW))
def test_every_exception_still_names_a_comparison_that_exists(relative: str, name: str) -> None:
    others = {key: why for key, why in NOT_A_ROW.items() if key != (relative, name)}
    assert [line for line in _scan(relative, others) if f"{name!r} in" in line] != []


def test_the_check_finds_a_name_compared_outside_its_row() -> None:
    text = (
        'def f(kind, probe):\n    return kind.name == "mooncake-master" or kind in ("x", "sa-bench")\n'
        'def g(probe, ports):\n    return probe.type == "http" or "http" in ports\n'
    )
    assert compared_names("plan/_builder.py", text, registered_names(), NOT_A_ROW) == [
        "srtd/plan/_builder.py:2: 'mooncake-master' in kind.name == 'mooncake-master'",
        "srtd/plan/_builder.py:2: 'sa-bench' in kind in ('x', 'sa-bench')",
        "srtd/plan/_builder.py:4: 'http' in probe.type == 'http'",
    ]
    # the same comparison in the row's own module is the table speaking
    own = 'def f(kind):\n    return kind.name == "mooncake-master"\n'
    assert compared_names("services/_mooncake.py", own, registered_names(), NOT_A_ROW) == []
