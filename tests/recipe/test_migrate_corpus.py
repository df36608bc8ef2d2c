"""`srtd migrate` on every schema 1 recipe of the shared corpus.

Each file migrates, loads and plans (every variant, on a synthetic allocation); the
plan's workers, nodes and GPUs per role are what the schema 1 `resources` section
said, computed here from the original; the original's comments are in the output;
a second migration changes nothing and `srtd migrate --check` agrees.
"""

from __future__ import annotations

import csv
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

import srtd.cli._commands  # noqa: F401  (registers the commands)
from srtd.cli._main import cli
from srtd.cli._verdict import verdict
from srtd.cluster import Cluster
from srtd.plan import build_plan
from srtd.recipe import LoadedRecipe, load_text, migrate_text
from srtd.recipe._variants import Variant, expand_overrides, expand_sweep, is_override_file
from srtd.unit import Plan, UnitKind
from tests.reference import CORPUS, need_shared

ROLES = ("prefill", "decode", "agg")


def manifest(layout: str) -> list[str]:
    """The corpus files of one layout (`v1`, `v2`); none when the shared material is absent."""
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return sorted(r["local_path"] for r in csv.DictReader(fh, delimiter="\t") if r["layout"] == layout)


@cache
def migrated(local_path: str) -> str:
    result = migrate_text((CORPUS / local_path).read_text(), local_path)
    assert result.changed
    return result.text


@cache
def recipes(local_path: str) -> tuple[LoadedRecipe, ...]:
    return tuple(load_text(migrated(local_path), local_path))


def original_variants(local_path: str) -> dict[str | None, dict[str, Any]]:
    """The schema 1 file's own variants (overrides merged, sweeps expanded), as plain data."""
    from srtd._yaml import parse_text

    data, positions = parse_text((CORPUS / local_path).read_text(), local_path)
    variants = expand_overrides(data, positions) if is_override_file(data) else [Variant(None, data, positions)]
    return {s.name: s.data for v in variants for s in expand_sweep(v)}


def expected_shape(resources: dict[str, Any]) -> dict[str, tuple[int, int | None, int]]:
    """role -> (workers, nodes or None when colocated, GPUs of all its workers), as schema 1 counted."""
    gpn = resources.get("gpus_per_node", 4)
    present = [r for r in ROLES if f"{r}_nodes" in resources or f"{r}_workers" in resources]
    colocated = "decode" in present and resources.get("decode_nodes") == 0
    out = {}
    for role in present:
        workers = resources.get(f"{role}_workers", 1)
        nodes = resources.get(f"{role}_nodes", 0)
        gpus = resources.get(f"gpus_per_{role}")
        if gpus is None:
            if colocated and role in ("prefill", "decode"):
                share_workers = resources.get("prefill_workers", 1) + resources.get("decode_workers", 1)
                gpus = resources["prefill_nodes"] * gpn // share_workers
            else:
                gpus = nodes * gpn // workers
        out[role] = (workers, None if role == "decode" and colocated else nodes, workers * gpus)
    return out


def plan_shape(plan: Plan, gpn: int) -> dict[str, tuple[int, int | None, int]]:
    out = {}
    for role in ROLES:
        units = [u for u in plan.units if u.kind is UnitKind.WORKER and u.role == role]
        if not units:
            continue
        workers = len({u.index for u in units})
        nodes = len({n for u in units for n in u.nodes})
        gpus = sum((len(u.gpus) or gpn) * len(u.nodes) for u in units)
        out[role] = (workers, nodes, gpus)
    return out


CASES = manifest("v1")


def test_the_corpus_has_the_schema_1_recipes_the_issue_counts() -> None:
    need_shared()
    assert len([p for p in CASES if p.startswith("srt-slurm-v1/")]) == 22
    assert len([p for p in CASES if p.startswith("srt-slurm/examples/")]) == 10


@pytest.mark.parametrize("local_path", CASES)
def test_migrates_validates_and_plans_with_the_schema_1_shape(local_path: str) -> None:
    need_shared()
    loaded = recipes(local_path)
    originals = original_variants(local_path)
    assert sorted(r.variant or "" for r in loaded) == sorted(n or "" for n in originals)
    for recipe in loaded:
        problems, _ = verdict(recipe, Cluster())
        assert problems == [], "\n".join(map(str, problems))
        plan = build_plan(recipe, Cluster())
        resources = originals[recipe.variant]["resources"]
        expected = expected_shape(resources)
        got = plan_shape(plan, recipe.recipe.resources.gpus_per_node)
        colocated = {r for r, (_, nodes, _) in expected.items() if nodes is None}
        for role in colocated:  # colocated decode: on the prefill nodes, no nodes of its own
            decode_nodes = {n for u in plan.units if u.role == role for n in u.nodes}
            prefill_nodes = {n for u in plan.units if u.role == "prefill" for n in u.nodes}
            assert decode_nodes <= prefill_nodes
            got[role] = (got[role][0], None, got[role][2])
        assert got == expected, recipe.variant


def comments_of(text: str) -> list[str]:
    """Every comment's text, found line by line (independently of ruamel)."""
    out = []
    for line in text.splitlines():
        match = re.search(r"(^|\s)#(.*)$", line)
        if match and match.group(2).strip():
            out.append(match.group(2).strip())
    return out


@pytest.mark.parametrize("local_path", CASES)
def test_every_comment_of_the_original_is_in_the_output(local_path: str) -> None:
    need_shared()
    output = migrated(local_path)
    missing = [c for c in comments_of((CORPUS / local_path).read_text()) if c not in output]
    assert missing == []


@pytest.mark.parametrize("local_path", CASES)
def test_migrating_twice_is_migrating_once_and_check_agrees(local_path: str, tmp_path: Path) -> None:
    need_shared()
    once = migrated(local_path)
    again = migrate_text(once, local_path)
    assert (again.changed, again.text, again.notes) == (False, once, ())
    path = tmp_path / "migrated.yaml"
    path.write_text(once)
    runner = CliRunner()
    result = runner.invoke(cli, ["migrate", "--check", str(path)], catch_exceptions=False)
    assert (result.exit_code, result.stdout) == (0, f"{path}: schema 2, nothing to change\n")
    original = tmp_path / "original.yaml"
    original.write_text((CORPUS / local_path).read_text())
    result = runner.invoke(cli, ["migrate", "--check", str(original)], catch_exceptions=False)
    assert (result.exit_code, result.stdout) == (1, f"{original}: would change\n")


def test_the_migrated_yaml_keeps_the_original_key_order_at_the_top() -> None:
    need_shared()
    yaml = YAML(typ="safe")
    for local_path in CASES:
        before = [k for k in yaml.load((CORPUS / local_path).read_text()) if k not in ("backend", "infra")]
        after = list(yaml.load(migrated(local_path)))
        kept = [k for k in after if k in before]
        assert kept == [k for k in before if k in after], local_path


# schema 2 files of the corpus that still carry schema 1 keys: the ones migrate touches
V2_WITH_LEFTOVERS = {
    "srt-slurm/examples/" + p
    for p in (
        "features/dynamo-source.yaml",
        "features/power-noprof.yaml",
        "features/profiling-vllm.yaml",
        "features/services.yaml",
        "mocker/dynamo-agg.yaml",
        "sglang/dynamo-agg.yaml",
        "sglang/sglang-router-agg.yaml",
        "trtllm/dynamo-agg.yaml",
        "trtllm/dynamo-disagg.yaml",
        "vllm/dynamo-agg.yaml",
        "vllm/vllm-direct-agg.yaml",
        "vllm/vllm-router-agg.yaml",
    )
}


def test_schema_2_files_change_only_where_they_carry_schema_1_keys() -> None:
    need_shared()
    changed = set()
    for local_path in manifest("v2"):
        text = (CORPUS / local_path).read_text()
        result = migrate_text(text, local_path)
        if result.changed:
            changed.add(local_path)
            assert migrate_text(result.text).text == result.text
            assert "schema 1" not in str(load_text_problems(result.text, local_path))
        else:
            assert result.text == text
    assert changed == V2_WITH_LEFTOVERS


def load_text_problems(text: str, name: str) -> list[str]:
    from srtd.errors import RecipeError

    try:
        load_text(text, name)
    except RecipeError as err:
        return [p.message for p in err.problems]
    return []


# `schema: 2` files still written with `backend:` (pre-2.0), whose `frontend.type: sglang` is the
# SGLang router of then: (workers, nodes, GPUs) of their one role as the original says.
PRE_ENGINE_SGLANG_ROUTER = {
    "srt-slurm/examples/features/services.yaml": {"agg": (2, 1, 2)},  # roles.agg: 1 node, 2 workers, 1 GPU each
    "srt-slurm/examples/sglang/sglang-router-agg.yaml": {"agg": (2, 1, 2)},  # resources.agg_*, gpus_per_agg
}
ROUTER_NOTE = (
    "frontend.type: sglang -> sglang-router; the file is written with `backend:` (before 2.0), "
    "when `sglang` meant the SGLang router"
)


@pytest.mark.parametrize("local_path", sorted(PRE_ENGINE_SGLANG_ROUTER))
def test_a_pre_engine_sglang_frontend_becomes_the_router_and_plans(local_path: str) -> None:
    need_shared()
    result = migrate_text((CORPUS / local_path).read_text(), local_path)
    assert ROUTER_NOTE in result.notes
    assert re.search(r"^frontend:\n  type: sglang-router\n", result.text, re.M)
    (recipe,) = load_text(result.text, local_path)
    assert recipe.recipe.frontend.type == "sglang-router"
    problems, _ = verdict(recipe, Cluster())
    assert problems == [], "\n".join(map(str, problems))
    plan = build_plan(recipe, Cluster())
    assert plan_shape(plan, recipe.recipe.resources.gpus_per_node) == PRE_ENGINE_SGLANG_ROUTER[local_path]
    assert [u.name for u in plan.units if u.kind is UnitKind.FRONTEND] == ["frontend_0"]


def test_a_schema_2_sglang_frontend_without_pre_engine_keys_stays_the_direct_server() -> None:
    text = (
        "schema: 2\nname: direct\nmodel: {path: /m, container: /c.sqsh}\nresources: {gpus_per_node: 8}\n"
        "frontend: {type: sglang}\nengine: {type: sglang, set_cuda_visible_devices: true}\n"
        "roles: {agg: {nodes: 1, gpus: 8}}\n"
    )
    result = migrate_text(text)
    assert result.changed
    assert "frontend: {type: sglang}" in result.text
    assert ROUTER_NOTE not in result.notes
