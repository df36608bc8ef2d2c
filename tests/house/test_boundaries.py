"""The house's rules that a grep can check: who may import what (docs/architecture.md).

Two rules.  A package imports only another package's public face (its `__init__`), never
a private `_module` of it.  And imports point down the layers below: a package may import
only packages of a lower layer, so the pipeline recipe -> plan -> supervisor -> launcher
never loops back.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRTD = ROOT / "srtd"

# The layers of srtd/, bottom first: each package (or top-level module) may import the
# packages of the layers below its own, and none of its own layer or above.
LAYERS: tuple[tuple[str, ...], ...] = (
    # dataclasses with shared methods; decoding JSON from others and checking its shape: for the journal's readers
    ("_shape", "_json", "_files", "_value"),
    ("_record",),  # frozen records checked by _shape: the plan's data types without pydantic
    ("_unit_knobs",),  # the unit's probes, restart, container, srun (srtd.unit is their face)
    (
        "errors",
        "events",
        "unit",
        "layout",
        "_registry",
        "_lazy",
        "_early_signals",
        "_gc",
        "patterns",
        "_yaml_depth",
        "_source",
        "_structlog",
        "_httpx",
        "toy",
    ),  # import nothing of srtd's (toy: a standalone program)
    ("_yaml", "_journal_file", "runtime", "status_api", "topology", "results"),
    ("recipe", "launch"),
    ("cluster", "supervisor"),  # the supervisor knows the plan's data types and the launcher, no recipe
    ("context", "reporting", "attach"),  # reporting and attach are services of a running job
    ("services", "collector"),
    ("engines",),  # engine rows may imply services
    ("frontends", "benchmarks"),
    ("plan",),  # assembles the rows' units
    ("sweep",),  # a campaign of submitted jobs: their journals, results and Slurm's word
    ("cli",),
    ("__main__",),
)
LAYER = {name: depth for depth, names in enumerate(LAYERS) for name in names}


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


def _part_of(path: Path) -> str:
    """The package (or top-level module) of srtd/ that a file belongs to."""
    relative = path.relative_to(SRTD)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def test_every_package_has_a_layer() -> None:
    parts = {_part_of(path) for path in SRTD.rglob("*.py")} - {"__init__"}
    assert sorted(parts - set(LAYER)) == []
    assert sorted(set(LAYER) - parts) == []


@pytest.mark.parametrize("part", sorted(LAYER))
def test_imports_point_down_the_layers(part: str) -> None:
    paths = sorted((SRTD / part).rglob("*.py")) if (SRTD / part).is_dir() else [SRTD / f"{part}.py"]
    offenders = []
    for path in paths:
        for line, module in _imports(path):
            names = module.split(".")
            if names[0] != "srtd" or len(names) < 2 or names[1] == part:
                continue
            if LAYER[names[1]] >= LAYER[part]:
                offenders.append(
                    f"{path.relative_to(ROOT)}:{line}: {module} (layer {LAYER[names[1]]} >= {LAYER[part]})"
                )
    assert offenders == []


@pytest.mark.parametrize("folder", ["perf", "scripts", "tests/fidelity"])
def test_the_harness_and_scripts_use_only_public_faces(folder: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, module in _imports(path)
        if _private_of_another_package(module, "")
    ]
    assert offenders == []
