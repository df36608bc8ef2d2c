"""The commands in the recipes' header comments name what the recipe really has.

A user copies them: `srtd run recipes/...` must name an existing recipe, `srtd plan ...`
must plan (it is run here, as written), a `pgrep -f` pattern must match a process the
recipe starts (its command line as this machine's plan launches it), and
`srtd restart|tail|signal JOB UNIT` must name one of its units.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

import srtd.cli._commands  # noqa: F401  (registers the commands)
from srtd.cli._main import cli
from srtd.cluster import Cluster
from srtd.plan import build_plan
from srtd.recipe import load_recipes
from srtd.unit import Plan

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").rglob("*.yaml"))
RECIPE_PATH = re.compile(r"\brecipes/[\w./-]+\.yaml\b")
PGREP = re.compile(r"pgrep -f '([^']+)'")
UNIT_VERB = re.compile(r"\bsrtd (?:restart|tail|signal) JOB (\S+)")
PLAN = re.compile(r"^#\s+srtd plan (.+?)(?:\s+#.*)?$")


def header(path: Path) -> list[str]:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


@cache
def local_plan(path: Path) -> Plan:
    return build_plan(load_recipes(path)[0], Cluster(), local=True)


def ident(value: object) -> str:
    return value.relative_to(ROOT).as_posix() if isinstance(value, Path) else str(value)


def names(pattern: re.Pattern[str]) -> list[tuple[Path, str]]:
    return [(p, m.group(1)) for p in RECIPES for line in header(p) for m in pattern.finditer(line)]


def test_the_header_commands_are_found() -> None:
    # the patterns below must keep finding the commands they check
    assert ("recipes/local/restart.yaml", "[s]rtd-toy-worker.*--role agg") in [
        (p.relative_to(ROOT).as_posix(), pat) for p, pat in names(PGREP)
    ]
    assert len(names(UNIT_VERB)) >= 2
    assert len(names(PLAN)) >= 8


@pytest.mark.parametrize("path", RECIPES, ids=ident)
def test_a_recipe_path_in_a_header_exists(path: Path) -> None:
    named = [m.group(0) for line in header(path) for m in RECIPE_PATH.finditer(line)]
    assert [n for n in named if not (ROOT / n).is_file()] == []


@pytest.mark.parametrize(("path", "pattern"), names(PGREP), ids=ident)
def test_a_pgrep_pattern_in_a_header_matches_a_process_of_the_recipe(path: Path, pattern: str) -> None:
    lines = [shlex.join(u.argv) for u in local_plan(path).units]
    assert any(re.search(pattern, line) for line in lines), (pattern, lines)


@pytest.mark.parametrize(("path", "unit"), names(UNIT_VERB), ids=ident)
def test_a_unit_named_in_a_header_is_a_unit_of_the_recipe(path: Path, unit: str) -> None:
    units = [u.name for u in local_plan(path).units]
    if "<node>" in unit:  # a Slurm plan's node name: the unit's pattern
        unit_re = re.escape(unit).replace(re.escape("<node>"), r"\w+")
        assert any(re.fullmatch(unit_re, u) for u in units), (unit, units)
    else:
        assert unit in units


@pytest.mark.parametrize(("path", "args"), names(PLAN), ids=ident)
def test_a_plan_command_in_a_header_plans(path: Path, args: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the commands are written for the repository's root
    result = CliRunner().invoke(cli, ["plan", *shlex.split(args)])
    assert result.exit_code == 0, result.output


def runs_aiperf_locally(path: Path) -> bool:
    text = "\n".join(header(path))
    return "srtd run" in text and load_recipes(path)[0].recipe.benchmark.type == "aiperf"


@pytest.mark.parametrize("path", [p for p in RECIPES if runs_aiperf_locally(p)], ids=ident)
def test_a_header_that_runs_aiperf_here_sources_the_dynamo_stack_first(path: Path) -> None:
    # aiperf lives in a venv of its own: only stack.env's SRTD_BINARIES tells srtd where (docs/dynamo-local.md)
    lines = [line.strip("# ") for line in header(path)]
    run = next(i for i, line in enumerate(lines) if line.startswith("srtd run"))
    assert any(line.startswith(". .nox/dynamo-stack/stack.env") for line in lines[:run]), lines
