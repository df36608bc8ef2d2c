"""Golden plans: what `srtd plan` prints for every recipe under recipes/, pinned byte for byte.

The files under tests/plan/golden/ are the CLI's own output, made from the repository
root (so recipe paths are relative).  After an intended change of the plan, rewrite them
and review the diff:

    SRTD_REGEN_GOLDEN=1 .venv/bin/pytest tests/plan/test_golden.py

`--sbatch` prints the recipe's absolute path in its exec line; the repository root is
written as `<repo>` in those files so they do not depend on where the checkout lives,
and the srtd it execs (the one that rendered it) as `srtd`.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

import srtd.cli._commands  # noqa: F401  (registers the commands)
from srtd.cli._main import cli
from srtd.cli._submit import srtd_command
from srtd.recipe import load_recipes
from srtd.unit import Plan

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
REGEN = os.environ.get("SRTD_REGEN_GOLDEN") == "1"


def recipe_paths() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "recipes").rglob("*.yaml"))


@cache
def variant_count(path: str) -> int:
    return len(load_recipes(ROOT / path))


def golden_name(path: str, suffix: str) -> str:
    return path.replace("/", "__") + suffix


# (recipe, extra CLI args, golden suffix): every JSON plan, the local demo, graphs and scripts.
def cases() -> list[tuple[str, tuple[str, ...], str]]:
    out = []
    for path in recipe_paths():
        args = ("--json", "--slurm", "--all") if variant_count(path) > 1 else ("--json", "--slurm")
        out.append((path, args, ".json"))
    out += [
        ("recipes/local/demo.yaml", ("--json", "--local"), ".local.json"),
        ("recipes/sglang/router-disagg.yaml", ("--graph", "mermaid", "--slurm"), ".mermaid"),
        ("recipes/sglang/dynamo-disagg.yaml", ("--graph", "mermaid", "--slurm"), ".mermaid"),
        ("recipes/services/mooncake.yaml", ("--graph", "dot", "--slurm"), ".dot"),
        ("recipes/pools/torchrun.yaml", ("--graph", "dot", "--slurm"), ".dot"),
        ("recipes/sglang/router-agg.yaml", ("--sbatch",), ".sbatch"),
        ("recipes/trtllm/multinode-disagg.yaml", ("--sbatch",), ".sbatch"),
    ]
    return out


def render(path: str, args: tuple[str, ...]) -> str:
    """The CLI's stdout, run from the repository root."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(cli, ["plan", path, *args], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    # `--sbatch` execs the srtd that rendered it: pinned as `srtd`, whichever venv runs the test.
    return result.stdout.replace(shlex.join(srtd_command()), "srtd").replace(str(ROOT), "<repo>")


def render_all() -> dict[str, str]:
    """Every golden output by file name (used in a second interpreter, see below)."""
    return {golden_name(p, s): render(p, a) for p, a, s in cases()}


def compare(name: str, text: str) -> None:
    target = GOLDEN / name
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        target.write_text(text)
        return
    assert target.is_file(), f"no golden file {target.name}; run SRTD_REGEN_GOLDEN=1 pytest {__file__}"
    expected = target.read_text()
    assert text == expected, f"{name} differs from the golden file; review, then regenerate with SRTD_REGEN_GOLDEN=1"


@pytest.mark.parametrize(("path", "args", "suffix"), cases(), ids=str)
def test_plan_output_is_pinned(path: str, args: tuple[str, ...], suffix: str) -> None:
    text = render(path, args)
    compare(golden_name(path, suffix), text)
    # planning twice gives the same bytes
    assert render(path, args) == text


def test_the_recipes_are_all_here() -> None:
    # Catches a recipe that stopped being found (a rename) and a golden file left behind.
    paths = recipe_paths()
    assert len(paths) >= 12
    assert "recipes/local/demo.yaml" in paths
    if REGEN:
        return
    wanted = {golden_name(p, s) for p, _, s in cases()}
    present = {p.name for p in GOLDEN.iterdir()}
    assert sorted(present - wanted) == [], "golden files of recipes that are gone"
    assert sorted(wanted - present) == [], "recipes without golden files (SRTD_REGEN_GOLDEN=1)"


def test_json_plans_are_plans_of_the_right_recipe() -> None:
    """The golden JSON is the documented contract: it loads back as Plan, names its recipe."""
    for path in recipe_paths():
        data = json.loads(render(path, ("--json", "--slurm", "--all")))
        assert len(data) == variant_count(path)
        for item in data:
            plan = Plan.load(item)
            assert plan.recipe == path  # relative: planned from the repository root
            assert plan.job_id == "local"
            assert plan.log_dir == "outputs/local/logs"
            assert Plan.loads(plan.dumps()) == plan
    sweep = json.loads(render("recipes/features/sweep.yaml", ("--json", "--all")))
    assert [p["variant"] for p in sweep] == [
        "concurrency=4,max_running_requests=16",
        "concurrency=4,max_running_requests=64",
        "concurrency=8,max_running_requests=16",
        "concurrency=8,max_running_requests=64",
    ]


def test_local_demo_differs_from_the_slurm_plan_where_it_should() -> None:
    slurm = Plan.loads(render("recipes/local/demo.yaml", ("--json", "--slurm")))
    local = Plan.loads(render("recipes/local/demo.yaml", ("--json", "--local")))
    assert (slurm.local, local.local) == (False, True)
    assert local.sbatch is None
    assert slurm.sbatch is not None
    assert set(local.addresses.values()) == {"127.0.0.1"}
    assert all(u.container is None for u in local.units)
    assert local.teardown.early_warning_seconds == 0


def test_several_recipes_need_all_or_a_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["plan", "recipes/features/sweep.yaml", "--json"])
    assert result.exit_code == 2
    assert result.stderr == (
        "srtd: recipes/features/sweep.yaml holds 4 recipes (concurrency=4,max_running_requests=16, "
        "concurrency=4,max_running_requests=64, concurrency=8,max_running_requests=16, "
        "concurrency=8,max_running_requests=64); choose one with --variant or use --all\n"
    )
    one = CliRunner().invoke(cli, ["plan", "recipes/features/sweep.yaml", "--json", "--variant", "concurrency=8,*"])
    assert one.exit_code == 2  # the glob still matches two
    exact = CliRunner().invoke(
        cli, ["plan", "recipes/features/sweep.yaml", "--json", "--variant", "concurrency=8,max_running_requests=64"]
    )
    assert exact.exit_code == 0, exact.output
    assert Plan.loads(exact.stdout).variant == "concurrency=8,max_running_requests=64"


def test_same_bytes_in_another_interpreter_with_another_hash_seed() -> None:
    """Set and dict order must not leak into a plan: a fresh process with a different
    PYTHONHASHSEED renders every golden output identically."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRTD_", "SLURM_"))}
    env["PYTHONHASHSEED"] = "12345" if os.environ.get("PYTHONHASHSEED") != "12345" else "54321"
    code = "import json, sys; from tests.plan.test_golden import render_all; json.dump(render_all(), sys.stdout)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    here = render_all()
    there = json.loads(done.stdout)
    assert sorted(there) == sorted(here)
    for name, text in here.items():
        assert there[name] == text, name
