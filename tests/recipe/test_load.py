"""Valid recipes: what the loader fills in, how override files and sweeps expand."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from srtd.errors import RecipeError
from srtd.recipe import (
    CustomEngine,
    LoadedRecipe,
    Recipe,
    RestartPolicy,
    ServiceMetrics,
    load_recipe,
    load_recipes,
)
from srtd.recipe._engines import SGLangEngine, VLLMEngine
from tests.recipe.samples import BASE, DISAGG, FILE, OVERRIDES, WITH_SERVICE, load, sub


def one(text: str, *, variant: str | None = None) -> Recipe:
    (loaded,) = load(text, variant=variant)
    return loaded.recipe


def by_variant(text: str) -> dict[str | None, Recipe]:
    return {r.variant: r.recipe for r in load(text)}


# --------------------------------------------------------------------------- defaults and short forms


def test_loaded_recipe_records_where_it_came_from() -> None:
    (loaded,) = load(BASE)
    assert isinstance(loaded, LoadedRecipe)
    assert loaded.file == FILE
    assert loaded.variant is None
    assert loaded.positions.file == FILE


def test_minimal_recipe_fields() -> None:
    recipe = one(BASE)
    assert recipe.schema_ == 2
    assert recipe.name == "t"
    assert recipe.model.path == "/models/m"
    assert recipe.resources.gpus_per_node == 8
    assert recipe.frontend.type == "sglang-router"
    assert list(recipe.roles) == ["agg"]
    agg = recipe.roles["agg"]
    assert (agg.nodes, agg.workers, agg.gpus) == (1, 1, 8)
    assert not recipe.disaggregated


def test_defaults_are_filled() -> None:
    recipe = one(BASE)
    agg = recipe.roles["agg"]
    assert agg.critical is True
    assert agg.restart == RestartPolicy(policy="never", max_restarts=3, backoff_seconds=10.0, max_backoff_seconds=300.0)
    assert agg.engine is None
    assert agg.env == {}
    assert agg.extra_args == ()
    assert recipe.benchmark.type == "manual"
    assert recipe.benchmark.req_rate == "inf"
    assert recipe.frontend.placement.node == "head"
    assert recipe.frontend.num_additional_frontends == 9
    assert recipe.dynamo.request_plane == "tcp"
    assert recipe.health_check.max_attempts == 180
    assert recipe.services == ()
    assert recipe.reporting is None
    assert recipe.sweep is None
    assert recipe.enable_config_dump is True


def test_engine_name_is_a_mapping_of_that_type() -> None:
    recipe = one(BASE)
    assert isinstance(recipe.engine, SGLangEngine)
    assert recipe.engine == SGLangEngine(type="sglang")
    assert recipe.engine_for("agg") is recipe.engine


def test_engine_mapping_fills_its_defaults() -> None:
    recipe = one(sub("engine: sglang\n", "engine:\n  type: vllm\n  connector: lmcache\n"))
    assert isinstance(recipe.engine, VLLMEngine)
    assert recipe.engine.connector == "lmcache"
    assert recipe.engine.dp_launch_mode == "per_node"
    assert recipe.engine.failover is None


def test_role_engine_without_top_level_engine() -> None:
    text = sub("engine: sglang\n", "").replace("    gpus: 8\n", "    gpus: 8\n    engine: vllm\n")
    recipe = one(text)
    assert recipe.engine is None
    assert isinstance(recipe.engine_for("agg"), VLLMEngine)


def test_custom_engine() -> None:
    text = sub(
        "engine: sglang\n",
        "engine:\n  type: custom\n  command: [python, -m, w, --port, '{port}']\n  health:\n    http: {path: /ready}\n",
    )
    engine = one(text).engine
    assert isinstance(engine, CustomEngine)
    assert engine.command == ("python", "-m", "w", "--port", "{port}")
    assert engine.health is not None
    assert engine.health.http is not None
    assert (engine.health.http.port, engine.health.http.path, engine.health.timeout_seconds) == (None, "/ready", 1800)


def test_frontend_none_with_custom_engine_roles() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: custom\n  command: [w, '{port}']\n  health:\n    tcp: {}\n")
    recipe = one(sub("  type: sglang-router\n", "  type: none\n", text))
    assert recipe.frontend.type == "none"
    assert isinstance(recipe.engine, CustomEngine)


def test_restart_string_form() -> None:
    recipe = one(sub("    gpus: 8\n", "    gpus: 8\n    restart: on-failure\n"))
    restart = recipe.roles["agg"].restart
    assert isinstance(restart, RestartPolicy)
    assert restart == RestartPolicy(policy="on-failure")
    assert restart.max_restarts == 3


def test_restart_mapping_form_keeps_unset_defaults() -> None:
    recipe = one(sub("    gpus: 8\n", "    gpus: 8\n    restart:\n      policy: always\n      backoff_seconds: 2\n"))
    assert recipe.roles["agg"].restart == RestartPolicy(
        policy="always", max_restarts=3, backoff_seconds=2.0, max_backoff_seconds=300.0
    )


def test_colocated_decode() -> None:
    recipe = one(DISAGG)
    assert recipe.disaggregated
    assert recipe.roles["decode"].colocated
    assert not recipe.roles["prefill"].colocated


def test_service_metrics_single_mapping_is_a_tuple_of_one() -> None:
    recipe = one(WITH_SERVICE + "    metrics:\n      port: 9100\n")
    (service,) = recipe.services
    assert service.metrics == (ServiceMetrics(port=9100),)
    assert service.metrics[0].path == "/metrics"
    assert service.metrics[0].nodes == "all"


def test_service_metrics_list() -> None:
    text = WITH_SERVICE + "    metrics:\n      - {port: 9100, name: a}\n      - {port: 9200, name: b, nodes: first}\n"
    (service,) = one(text).services
    assert [(m.port, m.name, m.nodes) for m in service.metrics] == [(9100, "a", "all"), (9200, "b", "first")]


def test_service_defaults() -> None:
    (service,) = one(WITH_SERVICE).services
    assert service.name == "a"
    assert service.type == "generic"
    assert service.command == ("sleep", "inf")
    assert service.placement is None
    assert service.placement_node is None
    assert service.critical is None
    assert service.enabled is True
    assert service.build_timeout_seconds == 1800


def test_service_placement_written_node() -> None:
    (service,) = one(WITH_SERVICE + "    placement:\n      per: node\n").services
    assert service.placement is not None
    assert service.placement_node is None  # node not written: the kind decides
    (service,) = one(WITH_SERVICE + "    placement:\n      node: head\n").services
    assert service.placement_node == "head"


def test_pool_owner_and_rider() -> None:
    text = WITH_SERVICE + "    nodes: 2\n  - name: b\n    command: [x]\n    placement:\n      pool: a\n"
    recipe = one(text)
    assert [s.name for s in recipe.pool_owners] == ["a"]
    assert recipe.services[1].placement is not None
    assert recipe.services[1].placement.pool == "a"


def test_quoted_digit_concurrencies_are_integers() -> None:
    recipe = one(BASE + "benchmark:\n  type: sa-bench\n  concurrencies: ['4', 8]\n")
    assert recipe.benchmark.concurrencies == (4, 8)


def test_concurrencies_x_string_stays_a_string() -> None:
    recipe = one(BASE + "benchmark:\n  type: sa-bench\n  concurrencies: 4x8x16\n")
    assert recipe.benchmark.concurrencies == "4x8x16"


def test_sequences_are_tuples_and_the_recipe_is_frozen() -> None:
    recipe = one(BASE + "extra_mount: [/a:/a, /b:/b:ro]\n")
    assert recipe.extra_mount == ("/a:/a", "/b:/b:ro")
    with pytest.raises(ValidationError, match="frozen"):
        recipe.name = "other"  # type: ignore[misc]


def test_yaml_date_is_read_as_its_text() -> None:
    assert one(sub("name: t\n", "name: 2024-01-01\n")).name == "2024-01-01"


def test_byte_order_mark_is_accepted() -> None:
    assert one("\ufeff" + BASE).name == "t"


# --------------------------------------------------------------------------- override files


def test_override_variant_names() -> None:
    assert list(by_variant(OVERRIDES)) == ["override_tp2"]
    text = OVERRIDES + "zip_override_ctx:\n  roles:\n    agg:\n      gpus: [1, 2]\n"
    assert list(by_variant(text)) == ["override_tp2", "zip_override_ctx[0]", "zip_override_ctx[1]"]


def test_base_alone_is_variant_base() -> None:
    text = OVERRIDES.split("override_tp2:")[0]
    assert list(by_variant(text)) == ["base"]


def test_schema_may_sit_inside_base() -> None:
    text = "base:\n  schema: 2\n" + OVERRIDES.split("base:\n")[1]
    assert list(by_variant(text)) == ["override_tp2"]


def test_override_mappings_merge_key_by_key() -> None:
    recipe = by_variant(OVERRIDES)["override_tp2"]
    agg = recipe.roles["agg"]
    assert (agg.nodes, agg.workers, agg.gpus) == (1, 1, 4)  # only gpus replaced
    assert recipe.model.path == "/models/m"  # untouched sections come from base


def test_override_lists_replace() -> None:
    text = OVERRIDES.replace("  frontend:\n", "  extra_mount: [/a:/a, /b:/b]\n  frontend:\n")
    text += "override_m:\n  extra_mount: [/c:/c]\n"
    recipes = by_variant(text)
    assert recipes["override_tp2"].extra_mount == ("/a:/a", "/b:/b")
    assert recipes["override_m"].extra_mount == ("/c:/c",)


def test_override_null_removes_a_key() -> None:
    text = OVERRIDES + "override_dyn:\n  frontend:\n    type: null\n  roles:\n    agg:\n      gpus: null\n"
    recipe = by_variant(text)["override_dyn"]
    assert recipe.frontend.type == "dynamo"  # the default, since base's value was removed
    assert recipe.roles["agg"].gpus is None
    assert recipe.roles["agg"].nodes == 1


def test_override_replaces_a_scalar_with_a_mapping() -> None:
    text = OVERRIDES + "override_eng:\n  engine:\n    type: vllm\n    connector: kvbm\n"
    engine = by_variant(text)["override_eng"].engine
    assert isinstance(engine, VLLMEngine)
    assert engine.connector == "kvbm"


def test_zip_pairs_by_position_and_broadcasts_one_element_lists() -> None:
    text = OVERRIDES + (
        "zip_override_ctx:\n  name: [only]\n  roles:\n    agg:\n      gpus: [2, 4, 8]\n      workers: [4, 2, 1]\n"
    )
    recipes = by_variant(text)
    got = [
        (recipes[f"zip_override_ctx[{i}]"].name, recipes[f"zip_override_ctx[{i}]"].roles["agg"].gpus) for i in range(3)
    ]
    assert got == [("only", 2), ("only", 4), ("only", 8)]
    assert [recipes[f"zip_override_ctx[{i}]"].roles["agg"].workers for i in range(3)] == [4, 2, 1]


def test_zip_list_of_lists_gives_each_variant_a_list() -> None:
    text = OVERRIDES + "zip_override_m:\n  extra_mount: [[/a:/a, /b:/b], [/c:/c]]\n"
    text += "  roles:\n    agg:\n      gpus: [2, 4]\n"
    recipes = by_variant(text)
    assert recipes["zip_override_m[0]"].extra_mount == ("/a:/a", "/b:/b")
    assert recipes["zip_override_m[1]"].extra_mount == ("/c:/c",)


def test_zip_one_element_list_of_a_list_is_a_literal_list_for_every_variant() -> None:
    text = OVERRIDES + "zip_override_m:\n  extra_mount: [[/a:/a, /b:/b]]\n  roles:\n    agg:\n      gpus: [2, 4]\n"
    recipes = by_variant(text)
    assert recipes["zip_override_m[0]"].extra_mount == ("/a:/a", "/b:/b")
    assert recipes["zip_override_m[1]"].extra_mount == ("/a:/a", "/b:/b")
    assert [recipes[f"zip_override_m[{i}]"].roles["agg"].gpus for i in (0, 1)] == [2, 4]


def test_variant_selection() -> None:
    text = OVERRIDES + "zip_override_ctx:\n  roles:\n    agg:\n      gpus: [1, 2]\n"
    assert [r.variant for r in load(text, variant="override_tp2")] == ["override_tp2"]
    assert [r.variant for r in load(text, variant="zip_override_ctx")] == ["zip_override_ctx[0]", "zip_override_ctx[1]"]
    assert [r.variant for r in load(text, variant="zip_override_ctx[1]")] == ["zip_override_ctx[1]"]
    assert [r.variant for r in load(text, variant="*ctx*")] == ["zip_override_ctx[0]", "zip_override_ctx[1]"]


def test_positions_of_an_override_point_at_the_override_block() -> None:
    (loaded,) = load(OVERRIDES)
    # roles.agg.gpus is written in the override block (line 21); roles.agg.nodes only in base (line 13).
    assert (loaded.problem("x", "roles.agg.gpus").line, loaded.problem("x", "roles.agg.nodes").line) == (21, 13)
    problem = loaded.problem("too many", "roles.agg.gpus")
    assert str(problem) == "r.yaml:21:7 [override_tp2] roles.agg.gpus: too many"


def test_positions_of_a_plain_recipe() -> None:
    (loaded,) = load(BASE)
    assert str(loaded.problem("m", "roles.agg.gpus")) == "r.yaml:14:5 roles.agg.gpus: m"
    assert str(loaded.problem("m", "roles.agg.gpus", prefer_key=False)) == "r.yaml:14:11 roles.agg.gpus: m"
    # Not written: its nearest written ancestor.
    assert str(loaded.problem("m", ("roles", "agg", "env", "X"))) == "r.yaml:11:3 roles.agg.env.X: m"


# --------------------------------------------------------------------------- sweeps


def test_sweep_grid_is_the_product() -> None:
    text = sub("    workers: 1\n", "    workers: '{w}'\n") + "output:\n  log_dir: 'logs/{g}-{w}'\nsweep:\n"
    text += "  g: [a, b]\n  w: [1, 2, 3]\n"
    recipes = by_variant(text)
    assert list(recipes) == ["g=a,w=1", "g=a,w=2", "g=a,w=3", "g=b,w=1", "g=b,w=2", "g=b,w=3"]
    assert recipes["g=b,w=2"].roles["agg"].workers == 2  # "{w}" alone takes the value's type
    assert recipes["g=b,w=2"].output.log_dir == "logs/b-2"  # inside a string it is text
    assert all(r.sweep is None for r in recipes.values())  # the sweep block is consumed


def test_sweep_names_are_a_equals_1_b_equals_2() -> None:
    text = BASE + "sweep:\n  a: [1]\n  b: [2]\n"
    assert list(by_variant(text)) == ["a=1,b=2"]


def test_sweep_zip_mode() -> None:
    text = BASE + "benchmark:\n  type: sa-bench\n  isl: '{i}'\n  osl: '{o}'\n"
    text += "sweep:\n  mode: zip\n  parameters:\n    i: [1024, 8192]\n    o: [1024, 1024]\n"
    recipes = by_variant(text)
    assert list(recipes) == ["i=1024,o=1024", "i=8192,o=1024"]
    assert [(r.benchmark.isl, r.benchmark.osl) for r in recipes.values()] == [(1024, 1024), (8192, 1024)]


def test_sweep_explicit_grid_mode() -> None:
    text = BASE + "sweep:\n  mode: grid\n  parameters:\n    a: [1, 2]\n    b: [3, 4]\n"
    assert list(by_variant(text)) == ["a=1,b=3", "a=1,b=4", "a=2,b=3", "a=2,b=4"]


def test_sweep_leaves_other_braces_alone() -> None:
    text = BASE + "output:\n  log_dir: 'logs/{job_id}/{name}/c{c}'\nsweep:\n  c: [4]\n"
    assert one(text).output.log_dir == "logs/{job_id}/{name}/c4"


def test_sweep_placeholder_becomes_a_list() -> None:
    text = BASE + "benchmark:\n  type: sa-bench\n  concurrencies: '{cs}'\nsweep:\n  cs: [[1, 2], [4]]\n"
    recipes = by_variant(text)
    assert [r.benchmark.concurrencies for r in recipes.values()] == [(1, 2), (4,)]


def test_sweep_in_an_override_base() -> None:
    text = OVERRIDES.replace("  frontend:\n", "  sweep:\n    c: [1, 2]\n  frontend:\n")
    assert list(by_variant(text)) == ["override_tp2/c=1", "override_tp2/c=2"]


def test_sweep_variant_selection() -> None:
    text = BASE + "sweep:\n  c: [1, 2]\n"
    assert [r.variant for r in load(text, variant="c=2")] == ["c=2"]


# --------------------------------------------------------------------------- files


def test_load_recipe_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(BASE)
    loaded = load_recipe(path)
    assert loaded.file == str(path)
    assert loaded.recipe.name == "t"


def test_load_recipe_refuses_several_variants(tmp_path: Path) -> None:
    path = tmp_path / "o.yaml"
    path.write_text(OVERRIDES + "override_b:\n  name: b\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    (problem,) = info.value.problems
    assert problem.message == "the file holds 2 recipes; choose one with --variant (override_tp2, override_b)"
    assert problem.file == str(path)
    assert load_recipe(path, variant="override_b").recipe.name == "b"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipes(tmp_path / "nope.yaml")
    assert [str(p) for p in info.value.problems] == [f"{tmp_path / 'nope.yaml'}: no such file"]


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipes(tmp_path)
    assert [p.message for p in info.value.problems] == ["is a directory, not a recipe file"]


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_bytes(BASE.encode() + b"name2: \xff\xfe\n")
    with pytest.raises(RecipeError) as info:
        load_recipes(path)
    assert [(p.line, p.message) for p in info.value.problems] == [(17, "not UTF-8 text")]


@pytest.mark.parametrize(
    "text",
    [BASE, OVERRIDES, BASE + "sweep:\n  c: [1, 2]\n", sub("    gpus: 8\n", "    gpus: x\n")],
    ids=["plain", "overrides", "sweep", "invalid"],
)
def test_loader_never_writes_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    before = path.stat()
    with contextlib.suppress(RecipeError):
        load_recipes(path)
    after = path.stat()
    assert path.read_text() == text
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.yaml"]  # no backup, no lock file
