"""Small pieces (docs/architecture.md): in srtd/, no module over 500 lines, no class over 250,
no function over 60.

A function or class is measured from its `def`/`class` line to its last line (decorators
not counted); a module by its line count.  The only lasting exceptions are registries that
are pure tables, each listed with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRTD = Path(__file__).resolve().parents[2] / "srtd"

MODULE_LINES = 500
CLASS_LINES = 250
FUNCTION_LINES = 60

# Registries that are pure tables (one row after another, nothing else to split by):
# module (relative to srtd/) -> why it may be longer.  Empty since the engine and recipe
# modules were split by concern.
TABLES: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(SRTD.rglob("*.py"))


def _defs(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]]:
    """Every function and class with its qualified name (`Class.method`, `outer.inner`)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            found.append((name, node))
            found.extend(_defs(node, f"{name}."))
        else:
            found.extend(_defs(node, prefix))
    return found


def oversized(path: Path) -> list[str]:
    """`module[:name]: N lines (limit L)` for each piece of the module over its limit."""
    relative = path.relative_to(SRTD).as_posix()
    text = path.read_text(encoding="utf-8")
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LINES and relative not in TABLES:
        found.append(f"{relative}: {lines} lines (limit {MODULE_LINES})")
    for name, node in _defs(ast.parse(text, relative)):
        assert node.end_lineno is not None
        size = node.end_lineno - node.lineno + 1
        limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
        if size > limit:
            found.append(f"{relative}:{name}: {size} lines (limit {limit})")
    return found


def test_no_module_class_or_function_is_over_its_limit() -> None:
    offenders = [line for path in _modules() for line in oversized(path)]
    assert offenders == []


def test_every_table_exception_is_a_long_module() -> None:
    short = [m for m in TABLES if len((SRTD / m).read_text(encoding="utf-8").splitlines()) <= MODULE_LINES]
    assert short == []


def test_the_measure_counts_from_def_to_last_line() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    text = f"class C:\n    def m(self):\n{body.replace('    ', '        ')}\n\ndef f():\n{body}    return 1\n"
    sizes = {name: node.end_lineno - node.lineno + 1 for name, node in _defs(ast.parse(text)) if node.end_lineno}
    assert sizes == {"C": 62, "C.m": 61, "f": 62}
