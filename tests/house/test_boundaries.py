"""The house's rules that a grep can check: who may import what (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRTD = Path(__file__).resolve().parents[2] / "srtd"


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def _private_of_another_package(module: str, own: str) -> bool:
    parts = module.split(".")
    if parts[0] != "srtd" or len(parts) < 3:
        return False
    return parts[1] != own and parts[2].startswith("_")


@pytest.mark.parametrize("package", sorted(p.name for p in SRTD.iterdir() if (p / "__init__.py").exists()))
def test_a_package_imports_only_the_public_face_of_another(package: str) -> None:
    offenders = [
        f"{path.relative_to(SRTD.parent)}:{line}: {module}"
        for path in sorted((SRTD / package).rglob("*.py"))
        for line, module in _imports(path)
        if _private_of_another_package(module, package)
    ]
    assert offenders == []


def test_the_attach_package_loads_its_modules_only_when_asked() -> None:
    code = (
        "import sys, srtd.attach as a; before = {m for m in sys.modules if m.startswith('srtd.attach._')}; "
        "a.running_jobs; after = {m for m in sys.modules if m.startswith('srtd.attach._')}; "
        "print(' '.join(sorted(before)), '|', ' '.join(sorted(after - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, loaded = out.split("|")
    assert before.split() == []  # importing the package loads none of its modules
    assert "srtd.attach._client" in loaded.split()
    assert not {"srtd.attach._server", "srtd.attach._view", "srtd.attach._timeline"} & set(loaded.split())
