"""`srtd migrate`: the folding rules, comments, variants, and the command line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import srtd.cli._commands  # noqa: F401  (registers the commands)
from srtd.cli._main import cli
from srtd.cluster import Cluster
from srtd.errors import RecipeError
from srtd.plan import build_plan
from srtd.recipe import load_text, migrate_text

# Every rule at once: roles from resources (decode colocated), infra, dynamo.hash, a
# dedicated frontend, backend -> engine + roles, mooncake_kv_store, a client placement,
# and one key no schema 2 field reads.
SCHEMA_1 = """\
# A schema 1 recipe
name: demo
model: {path: /models/m, container: img.sqsh, precision: fp8}

resources:
  gpu_type: h100
  gpus_per_node: 8
  prefill_nodes: 1  # one prefill node
  decode_nodes: 0   # colocated
  prefill_workers: 1
  decode_workers: 1

infra:
  etcd_nats_dedicated_node: true
  nats_max_payload_mb: 64

dynamo:
  hash: abc123  # pinned

frontend:
  type: dynamo
  dedicated_node: true

backend:
  type: sglang
  prefill_environment:
    A: "1"
  mooncake_kv_store:
    container: mc.sqsh
    master_extra_args: "--v=1"
    env:
      MC_X: "1"
  sglang_config:
    prefill:
      tensor-parallel-size: 4
    decode:
      tensor-parallel-size: 4

benchmark:
  type: manual
  client_placement: head
  tokenizer_mode: fast  # not in schema 2
"""

MIGRATED = """\
# A schema 1 recipe
schema: 2
name: demo
model: {path: /models/m, container: img.sqsh, precision: fp8}

resources:
  gpu_type: h100
  gpus_per_node: 8

services:
  - name: etcd
    type: etcd
    placement:
      node: dedicated
  - name: nats
    type: nats
    placement:
      node: dedicated
    options:
      max_payload_mb: 64
  - name: mooncake-master
    type: mooncake-master
    container: mc.sqsh
    args:
      - --v=1
dynamo:
  source:
    git: https://github.com/ai-dynamo/dynamo
    rev: abc123 # pinned

frontend:
  type: dynamo
  placement:
    node: dedicated

engine: sglang
roles:
  prefill:
    nodes: 1        # one prefill node
    workers: 1
    gpus: 4
    env:
      A: "1"
      MC_X: "1"
    args:
      tensor-parallel-size: 4
  decode:
    nodes: colocate # colocated
    workers: 1
    gpus: 4
    args:
      tensor-parallel-size: 4
    env:
      MC_X: "1"

benchmark:
  type: manual
  placement:
    node: head

# srtd migrate: schema 1 content with no schema 2 equivalent, kept as comments
# benchmark:
#   tokenizer_mode: fast  # not in schema 2
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_every_rule_of_one_recipe() -> None:
    result = migrate_text(SCHEMA_1, "r.yaml")
    assert result.changed
    assert result.text == MIGRATED
    assert result.notes == (
        "roles.prefill.gpus: 4, the even share of the prefill nodes schema 1 used",
        "roles.decode.gpus: 4, the even share of the prefill nodes schema 1 used",
        "benchmark.tokenizer_mode: no schema 2 field reads it; kept as a comment at the end of the file",
    )


def test_the_migrated_recipe_loads_and_plans() -> None:
    (loaded,) = load_text(migrate_text(SCHEMA_1).text, "r.yaml")
    recipe = loaded.recipe
    assert (recipe.roles["decode"].nodes, recipe.roles["decode"].gpus, recipe.roles["prefill"].gpus) == (
        "colocate",
        4,
        4,
    )
    assert [(s.name, s.type, s.placement_node) for s in recipe.services] == [
        ("etcd", "etcd", "dedicated"),
        ("nats", "nats", "dedicated"),
        ("mooncake-master", "mooncake-master", None),
    ]
    assert recipe.roles["decode"].env == {"MC_X": "1"}
    assert recipe.dynamo.source is not None
    assert recipe.dynamo.source.rev == "abc123"
    assert recipe.frontend.placement.node == "dedicated"
    assert build_plan(loaded, Cluster()).units


def test_a_moved_key_carries_its_comment() -> None:
    text = migrate_text(SCHEMA_1).text
    assert "    nodes: 1        # one prefill node\n" in text
    assert "    nodes: colocate # colocated\n" in text
    assert "    rev: abc123 # pinned\n" in text


def test_comment_lines_go_with_the_key_they_precede_to_its_new_place_and_depth() -> None:
    """Lines above a moved key leave with it, indented to where it lands; the lines above
    the key after it stay there (a line between `source:` and `pypi:` once meant a lost
    comment, and one at the wrong depth)."""
    text = textwrap.dedent(
        """\
        name: t
        model: {path: /m, container: img, precision: fp8}
        resources:
          gpu_type: h100
          # prefill sizing
          prefill_nodes: 1
          # decode sizing
          decode_nodes: 1
          # workers per prefill
          prefill_workers: 1
          decode_workers: 1
          gpus_per_node: 8
        backend:
          type: sglang
        frontend:
          type: sglang
          # the router runs on its own node
          dedicated_node: true
        dynamo:
          # the version comment
          version: 0.7.0
          # about the top of tree
          top_of_tree: false
        """
    )
    assert migrate_text(text).text == textwrap.dedent(
        """\
        schema: 2
        name: t
        model: {path: /m, container: img, precision: fp8}
        resources:
          gpu_type: h100
          gpus_per_node: 8
        engine: sglang
        roles:
          prefill:
            # prefill sizing
            nodes: 1
            # workers per prefill
            workers: 1
          decode:
            # decode sizing
            nodes: 1
            workers: 1
        frontend:
          type: sglang-router
          placement:
            # the router runs on its own node
            node: dedicated
        dynamo:
          # about the top of tree
          top_of_tree: false
          source:
            # the version comment
            pypi: 0.7.0
        """
    )


def test_a_comment_after_a_moved_first_key_stays_above_the_key_it_introduced() -> None:
    text = "name: t\ndynamo:\n  hash: abc  # pinned\n  # the wheel line\n  wheel: /w.whl\n  # kept\n  install: true\n"
    assert migrate_text(text).text.split("dynamo:\n")[1] == (
        "  # kept\n"
        "  install: true\n"
        "  source:\n"
        "    git: https://github.com/ai-dynamo/dynamo\n"
        "    rev: abc # pinned\n"
        "    # the wheel line\n"
        "    wheel: /w.whl\n"
    )


def test_schema_2_is_left_exactly_as_written() -> None:
    once = migrate_text(SCHEMA_1).text
    again = migrate_text(once)
    assert (again.changed, again.text, again.notes) == (False, once, ())
    odd = "schema: 2   # spacing and 'quotes' kept\nname:    x\n"
    assert migrate_text(odd).text == odd


def test_schema_2_leftovers_are_folded_and_nothing_else() -> None:
    text = textwrap.dedent(
        """\
        schema: 2
        name: t
        model: {path: /m, container: c, precision: fp8}
        resources:
          gpus_per_node: 8
          agg_nodes: 1  # one node
        frontend:
          type: sglang
        engine:
          type: vllm
          set_cuda_visible_devices: true
        """
    )
    result = migrate_text(text)
    # `frontend.type: sglang` means the direct server in schema 2: it stays
    assert result.text == textwrap.dedent(
        """\
        schema: 2
        name: t
        model: {path: /m, container: c, precision: fp8}
        resources:
          gpus_per_node: 8
        roles:
          agg:
            nodes: 1    # one node
        frontend:
          type: sglang
        engine:
          type: vllm
        """
    )
    # srtctl accepts the old GPU key and ignores it (it passes --device-ids): migrate drops it and says so
    assert result.notes == (
        "engine.set_cuda_visible_devices: dropped; srtctl no longer reads it (GPUs go by --device-ids; "
        "`engine.set_visible_devices: true` pins them by environment)",
    )


def test_an_override_file_folds_the_base_and_every_block() -> None:
    text = textwrap.dedent(
        """\
        base:
          name: ov
          model: {path: /models/m, container: img.sqsh, precision: fp8}
          resources:
            gpus_per_node: 8
            agg_nodes: 1
            agg_workers: 2
            gpus_per_agg: 4
          frontend:
            type: sglang
          backend:
            type: sglang
            sglang_config:
              aggregated:
                context-length: 4096

        # two variants
        zip_override_ctx:
          resources:
            agg_workers: [1, 2]
          backend:
            sglang_config:
              aggregated:
                context-length: [2048, 8192]
        """
    )
    migrated = migrate_text(text).text
    assert migrated == textwrap.dedent(
        """\
        schema: 2
        base:
          name: ov
          model: {path: /models/m, container: img.sqsh, precision: fp8}
          resources:
            gpus_per_node: 8
          frontend:
            type: sglang-router
          engine: sglang
          roles:
            agg:
              nodes: 1
              workers: 2
              gpus: 4
              args:
                context-length: 4096

        # two variants
        zip_override_ctx:
          roles:
            agg:
              workers: [1, 2]
              args:
                context-length: [2048, 8192]
        """
    )
    loaded = load_text(migrated, "o.yaml")
    assert [(r.variant, r.recipe.roles["agg"].workers, r.recipe.roles["agg"].args) for r in loaded] == [
        ("zip_override_ctx[0]", 1, {"context-length": 2048}),
        ("zip_override_ctx[1]", 2, {"context-length": 8192}),
    ]


def test_a_sweep_keeps_its_placeholders() -> None:
    text = textwrap.dedent(
        """\
        name: sw
        model: {path: /models/m, container: img.sqsh, precision: fp8}
        resources: {gpus_per_node: 8, agg_nodes: 1, agg_workers: "{workers}"}
        backend:
          type: sglang
        sweep:
          workers: [1, 2]
        """
    )
    loaded = load_text(migrate_text(text).text, "s.yaml")
    assert [(r.variant, r.recipe.roles["agg"].workers) for r in loaded] == [("workers=1", 1), ("workers=2", 2)]


def test_nothing_is_dropped_in_silence() -> None:
    text = "name: k\nmodel: {path: /m, container: c, precision: fp8}\nresources: {}\nkubernetes:\n  ns: x  # why\n"
    result = migrate_text(text)
    assert result.notes == ("kubernetes: no schema 2 field reads it; kept as a comment at the end of the file",)
    assert result.text.endswith(
        "# srtd migrate: schema 1 content with no schema 2 equivalent, kept as comments\n"
        "# kubernetes:\n"
        "#   ns: x  # why\n"
    )
    assert load_text(result.text, "k.yaml")[0].recipe.name == "k"


def test_placement_sidecar_kv_events_extra_args_pypi_and_the_scraper() -> None:
    text = """\
name: more
model: {path: /models/m, container: img.sqsh, precision: fp8}
resources:
  gpus_per_node: 4
  prefill_nodes: 1
  decode_nodes: 1
  prefill_critical: false
dynamo:
  version: 1.2.0
  sidecar: true
frontend:
  type: dynamo
  orchestrator_placement: head
  dedicated_node: true
backend:
  type: vllm
  connector: null
  kv_events_config:
    prefill: true
  decode_extra_args: ["--x"]
benchmark:
  type: manual
  client_dedicated_node: true
telemetry:
  enabled: true
  provider: scraper
  default_frequency: 2.0
  storage_subdir: tach
"""
    result = migrate_text(text)
    assert (
        result.text
        == """\
schema: 2
name: more
model: {path: /models/m, container: img.sqsh, precision: fp8}
resources:
  gpus_per_node: 4
dynamo:
  source:
    pypi: 1.2.0
frontend:
  type: dynamo
  placement:
    node: dedicated
engine:
  type: vllm
  connector:
roles:
  prefill:
    nodes: 1
    critical: false
    kv_events: true
    sidecar: true
  decode:
    nodes: 1
    extra_args: ["--x"]
    sidecar: true
benchmark:
  type: manual
  placement:
    node: dedicated
observability:
  tachometer:
    enabled: true
    collect_interval_ms: 500
    storage_subdir: tach
"""
    )
    assert result.notes == ("telemetry (provider: scraper): moved to observability.tachometer",)
    (loaded,) = load_text(result.text, "m.yaml")
    assert loaded.recipe.observability.tachometer.collect_interval_ms == 500


def test_invalid_yaml_is_refused_with_its_line() -> None:
    with pytest.raises(RecipeError) as info:
        migrate_text("name: a\nmodel: [\n", "bad.yaml")
    (problem,) = info.value.problems
    assert (problem.file, problem.line) == ("bad.yaml", 3)


# --------------------------------------------------------------------------- command line


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    path = tmp_path / "v1.yaml"
    path.write_text(SCHEMA_1)
    return path


def test_stdout_by_default_notes_on_stderr(v1: Path) -> None:
    result = run("migrate", str(v1))
    assert result.exit_code == 0
    assert result.stdout == MIGRATED
    assert result.stderr.splitlines()[0] == (
        f"{v1}: note: roles.prefill.gpus: 4, the even share of the prefill nodes schema 1 used"
    )
    assert v1.read_text() == SCHEMA_1


def test_in_place_then_check(v1: Path) -> None:
    assert run("migrate", "--check", str(v1)).exit_code == 1
    result = run("migrate", "--in-place", str(v1))
    assert (result.exit_code, result.stdout) == (0, f"{v1}: migrated to schema 2\n")
    assert v1.read_text() == MIGRATED
    result = run("migrate", "--check", str(v1))
    assert (result.exit_code, result.stdout) == (0, f"{v1}: schema 2, nothing to change\n")
    assert run("validate", str(v1)).exit_code == 0


def test_output_file(v1: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    result = run("migrate", str(v1), "-o", str(out))
    assert (result.exit_code, result.stdout) == (0, f"{v1}: migrated to schema 2, written to {out}\n")
    assert out.read_text() == MIGRATED
    assert v1.read_text() == SCHEMA_1


def test_diff_writes_nothing(v1: Path) -> None:
    result = run("migrate", "--diff", str(v1))
    assert result.exit_code == 0
    assert result.stdout.startswith(f"--- {v1}\n+++ {v1} (schema 2)\n")
    assert "+schema: 2\n" in result.stdout
    assert "-backend:\n" in result.stdout
    assert v1.read_text() == SCHEMA_1


def test_check_with_diff_exits_1_and_shows_it(v1: Path) -> None:
    result = run("migrate", "--check", "--diff", str(v1))
    assert result.exit_code == 1
    assert "+engine: sglang\n" in result.stdout
    assert result.stdout.endswith(f"{v1}: would change\n")


def test_json(v1: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [\n")
    result = run("migrate", "--json", str(v1), str(bad))
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["files"] == [
        {
            "file": str(v1),
            "changed": True,
            "written": None,
            "notes": list(migrate_text(SCHEMA_1).notes),
        }
    ]
    assert [(p["file"], p["line"]) for p in doc["problems"]] == [(str(bad), 2)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--in-place", "-o", "x.yaml"], "srtd: choose one of --in-place and -o\n"),
        (["--check", "--in-place"], "srtd: --check writes nothing; leave out --in-place and -o\n"),
    ],
)
def test_usage_errors(v1: Path, args: list[str], message: str) -> None:
    result = run("migrate", *args, str(v1))
    assert (result.exit_code, result.stderr) == (2, message)


def test_several_files_need_a_destination(v1: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(SCHEMA_1)
    result = run("migrate", str(v1), str(other))
    assert (result.exit_code, result.stderr) == (
        2,
        "srtd: several files: use --in-place, --check or --diff (stdout takes one)\n",
    )
    result = run("migrate", "-i", str(v1), str(other))
    assert result.exit_code == 0
    assert other.read_text() == v1.read_text() == MIGRATED


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = run("migrate", "--check", str(tmp_path / "nope.yaml"))
    assert (result.exit_code, result.stderr) == (2, f"{tmp_path / 'nope.yaml'}: no such file\n")


def test_the_loader_points_schema_1_at_the_command(v1: Path) -> None:
    result = run("validate", str(v1))
    assert result.exit_code == 2
    assert f"otherwise convert it with `srtd migrate {v1}`" in result.stderr


def test_a_zipped_decode_nodes_list_keeps_its_style_and_zero_means_colocate() -> None:
    text = textwrap.dedent(
        """\
        base:
          name: z
          model: {path: /m, container: c, precision: fp8}
          resources: {gpus_per_node: 8, prefill_nodes: 1, gpus_per_prefill: 4, gpus_per_decode: 4}
        zip_override_d:
          resources:
            decode_nodes: [0, 1]  # colocated, then its own node
        """
    )
    assert migrate_text(text).text.endswith(
        "zip_override_d:\n  roles:\n    decode:\n      nodes: [colocate, 1] # colocated, then its own node\n"
    )
