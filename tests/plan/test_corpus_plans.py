"""Every real recipe plans, and every plan keeps the invariants the supervisor relies on.

The corpus is srt-slurm's own v2 examples (`/work/shared/corpus/srt-slurm/`); the ones
the loader accepts must also pass `check_recipe` and plan, on Slurm and (where one
machine can hold them) locally.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.errors import PlanError, RecipeError
from srtd.plan import build_plan, check_recipe
from srtd.recipe import LoadedRecipe, load_recipes
from srtd.topology import PORT_KINDS
from srtd.unit import Plan, UnitKind
from tests.reference import CORPUS, need_shared

ROOT = Path(__file__).resolve().parents[2]
GLOBAL_KINDS = frozenset(name for name, kind in PORT_KINDS.items() if not kind.per_node)

# What the loader refuses among srt-slurm's v2 examples (schema 1 leftovers and the like;
# tests/recipe/test_corpus.py pins why).  Everything else must plan.
REFUSED = {
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
}

# Loaded, but refused by the plan checks for a newer srt-slurm service srtd does not support yet
# (none today: TRT-LLM's Mooncake pool and its donors are built).
NOT_YET: set[str] = set()

# Recipes one machine cannot hold, and why (the plan error, in full).
NOT_LOCAL = {
    "corpus:miles/qwen3-4b-grpo.yaml": (
        "port 6379 on this machine (local mode: every node is this one): both service_train_node1 and "
        "service_train_node2 listen on it\n"
        "port 8265 on this machine (local mode: every node is this one): both service_train_node1 and "
        "service_train_node2 listen on it"
    ),
    "recipes/services/mooncake.yaml": (
        "port 8800 on this machine (local mode: every node is this one): both service_store-prefill and "
        "service_store-decode listen on it"
    ),
}


def corpus_v2() -> list[str]:
    """srt-slurm's v2 examples, as paths under srt-slurm/examples/."""
    manifest = CORPUS / "MANIFEST.tsv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="") as fh:
        rows = [r["local_path"] for r in csv.DictReader(fh, delimiter="\t") if r["layout"] == "v2"]
    prefix = "srt-slurm/examples/"
    return sorted(p.removeprefix(prefix) for p in rows if p.startswith(prefix))


def own_recipes() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "recipes").rglob("*.yaml"))


def source_of(key: str) -> Path:
    if key.startswith("corpus:"):
        return CORPUS / "srt-slurm/examples" / key.removeprefix("corpus:")
    return ROOT / key


@cache
def recipes_of(key: str) -> tuple[LoadedRecipe, ...]:
    return tuple(load_recipes(source_of(key)))


@cache
def plan_of(key: str, variant: str | None, local: bool) -> Plan:
    loaded = next(r for r in recipes_of(key) if r.variant == variant)
    return build_plan(loaded, Cluster(), local=local)


def plannable() -> list[str]:
    return [f"corpus:{p}" for p in corpus_v2() if p not in REFUSED | NOT_YET] + own_recipes()


def test_the_corpus_is_as_expected() -> None:
    need_shared()
    found = corpus_v2()
    assert len(found) == 49
    assert set(found) > REFUSED
    for path in found:
        if path in REFUSED:
            with pytest.raises(RecipeError):
                load_recipes(CORPUS / "srt-slurm/examples" / path)
        if path in NOT_YET:
            problems = [p for r in load_recipes(CORPUS / "srt-slurm/examples" / path) for p in check_recipe(r)]
            assert problems
            assert all("does not support yet" in p.message for p in problems)


@pytest.mark.parametrize("key", plannable())
def test_accepted_recipes_pass_the_registry_checks_and_plan(key: str) -> None:
    if key.startswith("corpus:"):
        need_shared()
    loaded = recipes_of(key)
    assert loaded
    for recipe in loaded:
        assert check_recipe(recipe) == []
        plan = plan_of(key, recipe.variant, False)
        assert plan.units
        assert plan.sbatch is not None
        assert plan.sbatch.nodes == len(plan.allocation) - len(plan.nodes.get("unused", ()))
        if key in NOT_LOCAL:
            with pytest.raises(PlanError) as info:
                plan_of(key, recipe.variant, True)
            assert str(info.value) == NOT_LOCAL[key]
        else:
            local = plan_of(key, recipe.variant, True)
            assert local.local
            assert local.sbatch is None


# --------------------------------------------------------------------------- invariants


def port_clashes(plan: Plan) -> list[str]:
    """Two units binding one port on one node (locally: on this one machine)."""
    owner: dict[tuple[str, int], str] = {}
    out = []
    for unit in plan.units:
        for port in set(unit.ports.values()):
            key = ("" if plan.local else unit.nodes[0], port)
            if key in owner:
                out.append(f"{port} on {key[0] or 'this machine'}: {owner[key]} and {unit.name}")
            owner.setdefault(key, unit.name)
    return out


def global_repeats(plan: Plan) -> list[str]:
    """A job-wide port kind (per_node=False) handed out twice anywhere in the plan."""
    seen: dict[tuple[str, int], str] = {}
    out = []
    for unit in plan.units:
        for kind, port in unit.ports.items():
            if kind not in GLOBAL_KINDS:
                continue
            if (kind, port) in seen:
                out.append(f"{kind} {port}: {seen[kind, port]} and {unit.name}")
            seen.setdefault((kind, port), unit.name)
    return out


def assert_invariants(plan: Plan) -> None:
    names = [u.name for u in plan.units]
    assert [n for n, c in Counter(names).items() if c > 1] == []
    assert port_clashes(plan) == []
    assert global_repeats(plan) == []
    position = {n: i for i, n in enumerate(names)}
    for i, unit in enumerate(plan.units):
        assert len(set(unit.after)) == len(unit.after), f"{unit.name} waits twice for one unit: {unit.after}"
        for edge in unit.after:
            assert edge.unit in position, f"{unit.name} waits for {edge.unit}, not in the plan"
            assert position[edge.unit] < i, f"{unit.name} starts before {edge.unit}, which it waits for"
        assert unit.nodes, unit.name
        assert set(unit.nodes) <= set(plan.allocation), unit.name
        assert unit.argv, unit.name
        assert all(isinstance(a, str) for a in unit.argv), unit.name
        assert unit.phase in plan.phases, unit.name
        assert unit.tier in (0, 1, 2), unit.name
    if plan.gate is not None:
        assert plan.gate in position
    assert set(plan.teardown.tiers) == {str(u.tier) for u in plan.units}
    assert plan.teardown.total_seconds == sum(plan.teardown.tiers.values())
    assert not plan.hold or not any(u.terminal for u in plan.units)
    again = Plan.loads(plan.dumps())
    assert again == plan
    assert again.dumps() == plan.dumps()


def invariant_cases() -> list[tuple[str, str | None, bool]]:
    out: list[tuple[str, str | None, bool]] = []
    for key in plannable():
        if key.startswith("corpus:") and not (CORPUS / "MANIFEST.tsv").is_file():
            continue
        for recipe in recipes_of(key):
            out.append((key, recipe.variant, False))
            if key not in NOT_LOCAL:
                out.append((key, recipe.variant, True))
    return out


@pytest.mark.parametrize(("key", "variant", "local"), invariant_cases(), ids=str)
def test_plan_invariants(key: str, variant: str | None, local: bool) -> None:
    assert_invariants(plan_of(key, variant, local))


def test_the_invariant_checks_catch_what_they_claim() -> None:
    """The checks above are not vacuous: a doctored plan trips each one."""
    plan = plan_of("recipes/sglang/router-disagg.yaml", None, False)
    units = list(plan.units)
    first_worker = next(i for i, u in enumerate(units) if u.kind is UnitKind.WORKER)
    w = units[first_worker]
    # a second worker on the same node with the same http port
    twin = replace(w, name=w.name + "_twin")
    assert port_clashes(replace(plan, units=(*units, twin)))
    # a global kind repeated on another node
    moved = replace(twin, nodes=("elsewhere",), ports={"nccl": w.ports["nccl"]})
    assert global_repeats(replace(plan, units=(*units, moved)))
    assert not port_clashes(replace(plan, units=(*units, moved)))
    # start order: the frontend moved before the workers it waits for
    frontend = next(u for u in units if u.kind is UnitKind.FRONTEND)
    shuffled = [frontend, *(u for u in units if u is not frontend)]
    with pytest.raises(AssertionError, match="starts before"):
        assert_invariants(replace(plan, units=tuple(shuffled)))


def test_global_port_kinds_are_the_table_rows_without_per_node() -> None:
    assert sorted(GLOBAL_KINDS) == [
        "kv_events",
        "kv_replay",
        "kvbm_zmq",
        "load_publish",
        "moriio_handshake",
        "moriio_notify",
        "nccl",
        "nixl",
        "sidecar_grpc",
        "sys",
        "trtllm_dist_init",
        "vllm_scan",
    ]
