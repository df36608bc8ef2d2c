"""Invalid recipes: every problem is pinned by line, column, field path and message.

Each case is one of the small recipes of `samples` with one mutation, so the line
of the mistake is known; anything appended to BASE starts on line 17.
"""

from __future__ import annotations

import pytest

from srtd.errors import RecipeError
from tests.recipe.samples import (
    BASE,
    BASE_LINES,
    DISAGG,
    FILE,
    OVERRIDES,
    OVERRIDES_LINES,
    WITH_SERVICE,
    load,
    problems,
    problems_of,
    sub,
)


def legacy(name: str, replacement: str) -> str:
    return f"unknown field {name!r}: an older srt-slurm key; schema 2 writes {replacement} (`srtd migrate` rewrites it)"


def test_the_samples_are_valid() -> None:
    # The line numbers below rely on these lengths.
    assert len(BASE.splitlines()) == BASE_LINES == 16
    assert len(OVERRIDES.splitlines()) == OVERRIDES_LINES == 21
    assert len(WITH_SERVICE.splitlines()) == 19
    for text in (BASE, DISAGG, WITH_SERVICE):
        assert [r.variant for r in load(text)] == [None]
    assert [r.variant for r in load(OVERRIDES)] == ["override_tp2"]


# --------------------------------------------------------------------------- YAML itself


def test_yaml_syntax_error_unclosed_flow_list() -> None:
    text = sub("  precision: fp8\n", "  precision: [fp8\n")
    # YAML only notices on the next key, which is where it points.
    assert problems(text) == [(7, 10, "", "invalid YAML: expected ',' or ']', but got ':'")]


def test_yaml_syntax_error_mapping_value_in_a_scalar() -> None:
    text = sub("name: t\n", "name: t: x\n")
    assert problems(text) == [(2, 8, "", "invalid YAML: mapping values are not allowed here")]


def test_duplicate_key_names_the_first_line() -> None:
    text = sub("    gpus: 8\n", "    gpus: 8\n    nodes: 2\n")
    assert problems(text) == [(15, 5, "", 'invalid YAML: duplicate key "nodes" (first defined on line 12)')]


def test_duplicate_top_level_key_schema() -> None:
    text = sub("name: t\n", "name: t\nschema: 2\n")
    assert problems(text) == [(3, 1, "", 'invalid YAML: duplicate key "schema" (first defined on line 1)')]


def test_duplicate_key_that_is_not_first_in_its_mapping() -> None:
    text = sub("frontend:\n", "name: u\nfrontend:\n")
    assert problems(text) == [(15, 1, "", 'invalid YAML: duplicate key "name" (first defined on line 2)')]


def test_tab_indentation() -> None:
    text = sub("    workers: 1\n", "\tworkers: 1\n")
    assert problems(text) == [(13, 1, "", "invalid YAML: tab character; YAML indentation must use spaces")]


def test_tab_after_a_colon() -> None:
    text = sub("    workers: 1\n", "    workers:\t1\n")
    assert problems(text) == [(13, 13, "", "invalid YAML: tab character; YAML indentation must use spaces")]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "~\n"])
def test_empty_file(text: str) -> None:
    assert problems(text) == [(1, None, "", "the file is empty; a recipe is a YAML mapping")]


def test_top_level_list() -> None:
    message = "the top level is a list; a recipe is a YAML mapping"
    assert problems("- schema: 2\n- name: t\n") == [(1, None, "", message)]


@pytest.mark.parametrize(
    ("text", "kind"), [("hello\n", "str"), ("42\n", "int"), ("true\n", "bool"), ("1.5\n", "float")]
)
def test_top_level_scalar(text: str, kind: str) -> None:
    assert problems(text) == [(1, None, "", f"the top level is a {kind}; a recipe is a YAML mapping")]


def test_problem_str_is_file_line_column_path_message() -> None:
    (problem,) = problems_of(sub("    gpus: 8\n", "    gpus: four\n"))
    assert problem.file == FILE
    assert problem.variant is None
    assert str(problem) == "r.yaml:14:11 roles.agg.gpus: input should be a valid integer, got 'four'"


def test_problem_str_without_a_path() -> None:
    (problem,) = problems_of("[1, 2]\n")
    assert str(problem) == "r.yaml:1: the top level is a list; a recipe is a YAML mapping"


def test_non_printable_character_points_at_its_line() -> None:
    (problem,) = problems_of(BASE + "name2: a\x00b\n")
    assert problem.line == 17
    assert "\n" not in problem.message
    assert problem.message.startswith("invalid YAML: ")


def test_deeply_nested_yaml_is_a_recipe_error() -> None:
    text = BASE + "environment: " + "[" * 1000 + "]" * 1000 + "\n"
    with pytest.raises(RecipeError) as info:
        load(text)
    assert info.value.problems[0].line == 17


# --------------------------------------------------------------------------- schema version


# The schema 1 message names the command that converts the file.
V1_HINT = (
    "a schema 1 (pre-2.0) recipe, or a recipe without `schema: 2`; add `schema: 2` if it already uses "
    f"`roles:`, otherwise convert it with `srtd migrate {FILE}`"
)


def test_missing_schema_hints_at_migrate() -> None:
    text = sub("schema: 2\n", "")
    assert problems(text) == [(1, 1, "", f"missing `schema: 2`: {V1_HINT}")]


def test_schema_1() -> None:
    text = sub("schema: 2\n", "schema: 1\n")
    assert problems(text) == [(1, 9, "schema", f"schema must be 2, got 1: {V1_HINT}")]


def test_schema_quoted() -> None:
    text = sub("schema: 2\n", "schema: '2'\n")
    assert problems(text) == [(1, 9, "schema", f"schema must be 2, got '2': {V1_HINT}")]


def test_schema_1_inside_base_of_an_override_file() -> None:
    assert problems("base:\n  schema: 1\n") == [(2, 11, "schema", f"schema must be 2, got 1: {V1_HINT}")]


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    gpus: 8\n",
            "    gpus: four\n",
            (14, 11, "roles.agg.gpus", "input should be a valid integer, got 'four'"),
            id="word-for-int",
        ),
        pytest.param(
            "    gpus: 8\n",
            "    gpus: '8'\n",
            (14, 11, "roles.agg.gpus", "input should be a valid integer, got '8'"),
            id="quoted-int",
        ),
        pytest.param(
            "  gpus_per_node: 8\n",
            '  gpus_per_node: "8"\n',
            (8, 18, "resources.gpus_per_node", "input should be a valid integer, got '8'"),
            id="double-quoted-int",
        ),
        pytest.param(
            "    gpus: 8\n",
            "    gpus: 8.5\n",
            (14, 11, "roles.agg.gpus", "input should be a valid integer, got 8.5"),
            id="float-for-int",
        ),
        pytest.param(
            "    gpus: 8\n",
            "    gpus: 8\n    critical: 1\n",
            (15, 15, "roles.agg.critical", "input should be a valid boolean, got 1"),
            id="one-for-bool",
        ),
        pytest.param(
            "    gpus: 8\n",
            "    gpus: 8\n    critical: 'yes'\n",
            (15, 15, "roles.agg.critical", "input should be a valid boolean, got 'yes'"),
            id="string-for-bool",
        ),
        pytest.param(
            "name: t\n",
            "name: 7\n",
            (2, 7, "name", "input should be a valid string, got 7"),
            id="int-for-string",
        ),
        pytest.param(
            "  container: img.sqsh\n",
            "  container: [a, b]\n",
            (5, 14, "model.container", "input should be a valid string, got a list"),
            id="list-for-string",
        ),
        pytest.param(
            "model:\n  path: /models/m\n  container: img.sqsh\n  precision: fp8\n",
            "model: x\n",
            (3, 8, "model", "must be a mapping, got 'x'"),
            id="string-for-section",
        ),
        pytest.param(
            "  agg:\n    nodes: 1\n    workers: 1\n    gpus: 8\n",
            "  - agg\n",
            (11, 3, "roles", "must be a mapping, got a list"),
            id="list-for-roles",
        ),
        pytest.param(
            "engine: sglang\n",
            "engine: [sglang]\n",
            (9, 9, "engine", "must be a mapping, got a list"),
            id="list-for-engine",
        ),
    ],
)
def test_wrong_type(old: str, new: str, expected: tuple[int, int, str, str]) -> None:
    assert problems(sub(old, new)) == [expected]


def test_bool_one_at_top_level() -> None:
    text = BASE + "enable_config_dump: 1\n"
    assert problems(text) == [(17, 21, "enable_config_dump", "input should be a valid boolean, got 1")]


def test_environment_value_must_be_a_string() -> None:
    text = BASE + "environment:\n  FOO: 1\n"
    assert problems(text) == [(18, 8, "environment.FOO", "input should be a valid string, got 1")]


def test_services_must_be_a_list() -> None:
    text = BASE + "services:\n  name: a\n"
    assert problems(text) == [(18, 3, "services", "must be a list, got a mapping")]


def test_nested_garbage_where_an_int_belongs() -> None:
    text = BASE + "health_check:\n  max_attempts:\n    a: [1, {b: c}]\n"
    assert problems(text) == [(19, 5, "health_check.max_attempts", "input should be a valid integer, got a mapping")]


def test_missing_required_nested_field_points_at_its_section() -> None:
    text = sub("  path: /models/m\n", "")
    assert problems(text) == [(3, 1, "model.path", "required field is missing")]


@pytest.mark.parametrize(
    ("old", "path", "message"),
    [
        ("name: t\n", "name", "required field is missing"),
        ("resources:\n  gpus_per_node: 8\n", "resources", "required field is missing"),
        ("engine: sglang\n", "engine", "worker roles need an engine: set `engine` or roles.agg.engine"),
    ],
)
def test_missing_top_level_key_has_a_line(old: str, path: str, message: str) -> None:
    (problem,) = problems_of(sub(old, ""))
    assert (problem.path, problem.message) == (path, message)
    assert problem.line is not None


def test_empty_value_points_at_its_own_line() -> None:
    text = sub("name: t\n", "name:\n")
    assert [(p.line, p.path, p.message) for p in problems_of(text)] == [
        (2, "name", "input should be a valid string, got nothing (null)")
    ]


# --------------------------------------------------------------------------- unknown keys


def test_unknown_top_level_key_did_you_mean() -> None:
    text = BASE + "frontnd:\n  type: x\n"
    assert problems(text) == [(17, 1, "frontnd", "unknown field 'frontnd'; did you mean 'frontend'?")]


def test_unknown_top_level_key_without_a_close_match() -> None:
    assert problems(BASE + "zzzzz: 1\n") == [(17, 1, "zzzzz", "unknown field 'zzzzz'")]


def test_unknown_nested_key_did_you_mean() -> None:
    text = sub("    gpus: 8\n", "    gpu: 8\n")
    assert problems(text) == [(14, 5, "roles.agg.gpu", "unknown field 'gpu'; did you mean 'gpus'?")]


def test_unknown_key_in_a_service() -> None:
    text = WITH_SERVICE + "    comand: [x]\n"
    assert problems(text) == [(20, 5, "services.0.comand", "unknown field 'comand'; did you mean 'command'?")]


def test_non_string_key() -> None:
    assert problems(BASE + "1: 2\n") == [(17, 1, "1", "unknown field '1'")]


# --------------------------------------------------------------------------- schema 1 leftovers


def test_v1_backend() -> None:
    text = BASE + "backend:\n  type: sglang\n"
    message = legacy("backend", "`engine` (the engine type and knobs) and `roles.<role>.args` / `roles.<role>.env`")
    assert problems(text) == [(17, 1, "backend", message)]


def test_v1_resources_agg_nodes() -> None:
    text = sub("  gpus_per_node: 8\n", "  gpus_per_node: 8\n  agg_nodes: 1\n")
    assert problems(text) == [(9, 3, "resources.agg_nodes", legacy("agg_nodes", "`roles.agg.nodes`"))]


def test_v1_resources_gpus_per_prefill() -> None:
    text = sub("  gpus_per_node: 8\n", "  gpus_per_node: 8\n  gpus_per_prefill: 4\n")
    expected = (9, 3, "resources.gpus_per_prefill", legacy("gpus_per_prefill", "`roles.prefill.gpus`"))
    assert problems(text) == [expected]


def test_v1_resources_decode_workers() -> None:
    text = sub("  gpus_per_node: 8\n", "  gpus_per_node: 8\n  decode_workers: 4\n")
    expected = (9, 3, "resources.decode_workers", legacy("decode_workers", "`roles.decode.workers`"))
    assert problems(text) == [expected]


def test_v1_dynamo_version() -> None:
    text = BASE + "dynamo:\n  version: 0.7.0\n"
    assert problems(text) == [(18, 3, "dynamo.version", legacy("version", "`dynamo.source.pypi`"))]


def test_v1_benchmark_client_placement() -> None:
    text = BASE + "benchmark:\n  type: manual\n  client_placement: head\n"
    expected = (19, 3, "benchmark.client_placement", legacy("client_placement", "`benchmark.placement.node`"))
    assert problems(text) == [expected]


def test_v1_engine_set_cuda_visible_devices() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: vllm\n  set_cuda_visible_devices: true\n")
    expected = (
        11,
        3,
        "engine.set_cuda_visible_devices",
        "unknown field 'set_cuda_visible_devices': an older srt-slurm key srtctl no longer reads (GPUs go by "
        "--device-ids; `engine.set_visible_devices: true` pins them by environment); `srtd migrate` drops it",
    )
    assert problems(text) == [expected]


# --------------------------------------------------------------------------- engines and roles


def test_unknown_engine_name() -> None:
    text = sub("engine: sglang\n", "engine: sglangx\n")
    message = (
        "unknown type 'sglangx'; did you mean 'sglang'? "
        "known: sglang, vllm, trtllm, mocker, atom, tilert, tokenspeed, custom, toy"
    )
    assert problems(text) == [(9, 9, "engine.type", message)]


def test_unknown_engine_type_in_a_mapping() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: foo\n")
    message = "unknown type 'foo'; known: sglang, vllm, trtllm, mocker, atom, tilert, tokenspeed, custom, toy"
    assert problems(text) == [(10, 9, "engine.type", message)]


def test_engine_mapping_without_type() -> None:
    text = sub("engine: sglang\n", "engine:\n  connector: nixl\n")
    assert problems(text) == [(9, 1, "engine", "needs a `type`")]


def test_unknown_role_name() -> None:
    text = sub("  agg:\n", "  aggregated:\n")
    assert problems(text) == [(11, 3, "roles.aggregated", "unknown role 'aggregated'; roles are prefill, decode, agg")]


def test_agg_with_prefill_and_decode() -> None:
    text = sub("frontend:\n", "  prefill:\n    nodes: 1\n  decode:\n    nodes: 1\nfrontend:\n")
    assert problems(text) == [(11, 3, "roles.agg", "an aggregated role cannot be combined with prefill/decode roles")]


def test_prefill_without_decode() -> None:
    text = sub("  agg:\n", "  prefill:\n")
    message = "a disaggregated recipe needs both prefill and decode; decode is missing"
    assert problems(text) == [(11, 3, "roles.prefill", message)]


def test_decode_without_prefill() -> None:
    text = sub("  agg:\n", "  decode:\n")
    message = "a disaggregated recipe needs both prefill and decode; prefill is missing"
    assert problems(text) == [(11, 3, "roles.decode", message)]


def test_top_level_engine_and_role_engine() -> None:
    text = sub("    gpus: 8\n", "    gpus: 8\n    engine: vllm\n")
    message = "the recipe has a top-level `engine`; set the engine there or on every role, not both"
    assert problems(text) == [(15, 5, "roles.agg.engine", message)]


def test_roles_without_any_engine() -> None:
    text = sub("engine: sglang\n", "")
    assert [(p.path, p.message) for p in problems_of(text)] == [
        ("engine", "worker roles need an engine: set `engine` or roles.agg.engine")
    ]


def test_negative_workers() -> None:
    text = sub("    workers: 1\n", "    workers: -1\n")
    assert problems(text) == [(13, 5, "roles.agg.workers", "must be at least 1, got -1")]


def test_zero_workers() -> None:
    text = sub("    workers: 1\n", "    workers: 0\n")
    assert problems(text) == [(13, 5, "roles.agg.workers", "must be at least 1, got 0")]


def test_negative_nodes() -> None:
    text = sub("    nodes: 1\n", "    nodes: -2\n")
    assert problems(text) == [(12, 5, "roles.agg.nodes", "must be 0 or more, got -2")]


def test_zero_gpus() -> None:
    text = sub("    gpus: 8\n", "    gpus: 0\n")
    assert problems(text) == [(14, 5, "roles.agg.gpus", "must be at least 1, got 0")]


def test_nodes_word_is_one_problem() -> None:
    text = sub("    nodes: 1\n", "    nodes: one\n")
    assert [(p.line, p.column, p.path) for p in problems_of(text)] == [(12, 12, "roles.agg.nodes")]


def test_colocate_on_prefill() -> None:
    text = sub("  prefill:\n    nodes: 1\n", "  prefill:\n    nodes: colocate\n", DISAGG)
    assert problems(text) == [
        (12, 5, "roles.prefill.nodes", "only the decode role can colocate onto the prefill nodes"),
        (12, 5, "roles.prefill.nodes", "decode colocates onto the prefill nodes, so prefill needs nodes"),
    ]


def test_colocate_without_gpus() -> None:
    text = sub("    nodes: colocate\n    workers: 1\n    gpus: 4\n", "    nodes: colocate\n    workers: 1\n", DISAGG)
    # decode.gpus is not written; the problem points at the decode role.
    assert problems(text) == [(15, 3, "roles.decode.gpus", "both roles must state `gpus` when decode colocates")]


def test_colocate_that_does_not_fit() -> None:
    text = sub("    nodes: colocate\n    workers: 1\n", "    nodes: colocate\n    workers: 2\n", DISAGG)
    message = "prefill and colocated decode need 12 GPUs but the 1 prefill node(s) have 8"
    assert problems(text) == [(18, 5, "roles.decode.gpus", message)]


def test_restart_max_restarts_below_zero() -> None:
    text = sub("    gpus: 8\n", "    gpus: 8\n    restart:\n      policy: on-failure\n      max_restarts: -1\n")
    assert problems(text) == [(17, 7, "roles.agg.restart.max_restarts", "must be 0 or more, got -1")]


def test_restart_max_backoff_below_backoff() -> None:
    text = sub("    gpus: 8\n", "    gpus: 8\n    restart:\n      backoff_seconds: 30\n      max_backoff_seconds: 5\n")
    message = "must be at least backoff_seconds (30), got 5"
    assert problems(text) == [(17, 7, "roles.agg.restart.max_backoff_seconds", message)]


def test_restart_unknown_policy_string() -> None:
    text = sub("    gpus: 8\n", "    gpus: 8\n    restart: sometimes\n")
    message = "must be 'never', 'on-failure' or 'always', got 'sometimes'"
    assert problems(text) == [(15, 14, "roles.agg.restart", message)]


def test_restart_unknown_policy_in_a_mapping() -> None:
    text = sub("    gpus: 8\n", "    gpus: 8\n    restart:\n      policy: sometimes\n")
    message = "must be 'never', 'on-failure' or 'always', got 'sometimes'"
    assert problems(text) == [(16, 15, "roles.agg.restart.policy", message)]


def test_custom_engine_without_command() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: custom\n")
    assert problems(text) == [(9, 1, "engine.command", "required field is missing")]


def test_custom_engine_blank_arg() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: custom\n  command: [python, '', x]\n")
    (problem,) = problems_of(text)
    assert problem.message == "must not be blank"


def test_custom_engine_blank_arg_points_at_the_item() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: custom\n  command: [python, '', x]\n")
    assert problems(text) == [(11, 21, "engine.command.1", "must not be blank")]


def test_custom_engine_empty_command_points_at_the_command() -> None:
    text = sub("engine: sglang\n", "engine:\n  type: custom\n  command: []\n")
    assert problems(text) == [(11, 3, "engine.command", "must not be empty")]


# --------------------------------------------------------------------------- frontend, benchmark, other sections


def test_frontend_none_with_roles() -> None:
    text = sub("  type: sglang-router\n", "  type: none\n")
    message = (
        "`none` runs no frontend, so only custom-engine roles (gated by their own `health`) may run; "
        "roles.agg uses sglang"
    )
    assert problems(text) == [(16, 3, "frontend.type", message)]


def test_frontend_placement_last_decode() -> None:
    text = BASE + "  placement:\n    node: last_decode\n"
    message = "last_decode is a benchmark placement; frontends use head, first_decode or dedicated"
    assert problems(text) == [(18, 5, "frontend.placement.node", message)]


def test_frontend_placement_outside_its_vocabulary() -> None:
    text = BASE + "  placement:\n    node: nowhere\n"
    message = "must be head, dedicated, first_decode or last_decode, got 'nowhere'"
    assert problems(text) == [(18, 5, "frontend.placement.node", message)]


def test_benchmark_placement_first_decode() -> None:
    text = BASE + "benchmark:\n  placement:\n    node: first_decode\n"
    message = "first_decode is a frontend placement; the client uses head, last_decode or dedicated"
    assert problems(text) == [(19, 5, "benchmark.placement.node", message)]


def test_terminal_service_with_a_benchmark() -> None:
    text = BASE + (
        "benchmark:\n  type: sa-bench\nservices:\n  - name: job\n    command: [python, run.py]\n    terminal: true\n"
    )
    message = "terminal services (job) are the job's run; benchmark.type must stay `manual`, not 'sa-bench'"
    assert problems(text) == [(18, 3, "benchmark.type", message)]


def test_dynamo_source_pypi_and_rev() -> None:
    text = BASE + "dynamo:\n  source:\n    pypi: 0.7.0\n    rev: abc123\n"
    assert problems(text) == [(18, 3, "dynamo.source", "give exactly one of rev, pypi or wheel; found rev, pypi")]


def test_dynamo_source_git_without_rev() -> None:
    text = BASE + "dynamo:\n  source:\n    git: https://example.com/dynamo.git\n"
    assert problems(text) == [(18, 3, "dynamo.source.rev", "a git source needs an immutable rev")]


def test_otel_without_endpoint() -> None:
    text = BASE + "observability:\n  enable_otel: true\n"
    # otel_endpoint is not written; the problem points at the section.
    assert problems(text) == [(17, 1, "observability.otel_endpoint", "is required when enable_otel is true")]


def test_literal_secret_in_s3() -> None:
    text = BASE + "reporting:\n  s3:\n    bucket: b\n    secret_access_key: abc\n"
    message = "secrets are not accepted in a recipe; set $AWS_SECRET_ACCESS_KEY in the environment"
    assert problems(text) == [(20, 5, "reporting.s3.secret_access_key", message)]


def test_literal_secrets_in_ai_analysis() -> None:
    text = BASE + "reporting:\n  ai_analysis:\n    enabled: true\n    openrouter_api_key: k\n    gh_token: ghp_x\n"
    assert problems(text) == [
        (
            20,
            5,
            "reporting.ai_analysis.openrouter_api_key",
            "secrets are not accepted in a recipe; set $OPENROUTER_API_KEY in the environment",
        ),
        (
            21,
            5,
            "reporting.ai_analysis.gh_token",
            "secrets are not accepted in a recipe; set $GH_TOKEN in the environment",
        ),
    ]


def test_gpus_per_node_zero() -> None:
    text = sub("  gpus_per_node: 8\n", "  gpus_per_node: 0\n")
    assert problems(text) == [(8, 3, "resources.gpus_per_node", "must be 1 to 1024, got 0")]


# --------------------------------------------------------------------------- services (lines 17-19 are service `a`)


def test_duplicate_service_names() -> None:
    text = WITH_SERVICE + "  - name: a\n    command: [sleep, '1']\n"
    assert problems(text) == [(20, 5, "services.1.name", "duplicate service name 'a' (also services.0)")]


def test_blank_service_name() -> None:
    text = sub("  - name: a\n", "  - name: ' '\n", WITH_SERVICE)
    assert problems(text) == [(18, 5, "services.0.name", "must not be empty")]


def test_blank_command_entry() -> None:
    text = sub("[sleep, inf]", "[sleep, ' ']", WITH_SERVICE)
    assert problems(text) == [(19, 22, "services.0.command.1", "must not be blank")]


def test_empty_command_list() -> None:
    text = sub("[sleep, inf]", "[]", WITH_SERVICE)
    message = "must not be empty; leave it out to use the kind's command"
    assert problems(text) == [(19, 5, "services.0.command", message)]


def test_pool_naming_no_owner() -> None:
    text = WITH_SERVICE + "    placement:\n      pool: gpuz\n"
    message = "'gpuz' is not a pool (services that own nodes: none)"
    assert problems(text) == [(21, 7, "services.0.placement.pool", message)]


def test_pool_naming_no_owner_lists_the_owners() -> None:
    text = WITH_SERVICE + "    nodes: 2\n  - name: b\n    command: [x]\n    placement:\n      pool: c\n"
    message = "'c' is not a pool (services that own nodes: a)"
    assert problems(text) == [(24, 7, "services.1.placement.pool", message)]


def test_pool_and_placement_node_together() -> None:
    text = WITH_SERVICE + (
        "    nodes: 2\n  - name: b\n    command: [x]\n    placement:\n      pool: a\n      node: head\n"
    )
    assert problems(text) == [(24, 7, "services.1.placement.pool", "replaces placement.node; give one of them")]


def test_per_worker_on_head() -> None:
    text = WITH_SERVICE + "    placement:\n      node: head\n      per: worker\n"
    message = "`per: worker` needs placement.node prefill, decode, agg or workers, not 'head'"
    assert problems(text) == [(22, 7, "services.0.placement.per", message)]


def test_per_worker_with_tcp_readiness() -> None:
    text = WITH_SERVICE + (
        "    placement:\n      node: decode\n      per: worker\n    readiness:\n      tcp:\n        port: 9000\n"
    )
    message = "per-worker instances share their node's ports; only a `log` probe can tell them apart"
    assert problems(text) == [(23, 5, "services.0.readiness", message)]


def test_source_with_a_moving_rev() -> None:
    text = WITH_SERVICE + "    source:\n      git: https://example.com/x.git\n      rev: main\n"
    message = "'main' is a branch and moves; use a commit SHA, a tag or refs/pull/<n>/head"
    assert problems(text) == [(22, 7, "services.0.source.rev", message)]


def test_source_with_refs_heads() -> None:
    text = WITH_SERVICE + "    source:\n      git: https://example.com/x.git\n      rev: refs/heads/feature\n"
    message = "'refs/heads/feature' is a branch and moves; use a commit SHA, a tag or refs/pull/<n>/head"
    assert problems(text) == [(22, 7, "services.0.source.rev", message)]


def test_source_with_a_multi_node_placement() -> None:
    text = WITH_SERVICE + (
        "    placement:\n      node: all\n    source:\n      git: https://example.com/x.git\n      rev: v1.0\n"
    )
    message = "a source build needs a single-node placement (head, infra or dedicated)"
    assert problems(text) == [(22, 5, "services.0.source", message)]


def test_readiness_with_two_probes() -> None:
    text = WITH_SERVICE + "    readiness:\n      port: 80\n      http:\n        port: 81\n"
    message = "name exactly one probe (port / tcp / http / log / file); found port, http"
    assert problems(text) == [(20, 5, "services.0.readiness", message)]


def test_readiness_with_no_probe() -> None:
    text = WITH_SERVICE + "    readiness:\n      timeout_seconds: 10\n"
    message = "name exactly one probe (port / tcp / http / log / file); found none"
    assert problems(text) == [(20, 5, "services.0.readiness", message)]


def test_readiness_port_out_of_range() -> None:
    text = WITH_SERVICE + "    readiness:\n      port: 70000\n"
    message = "port must be between 1 and 65535, got 70000"
    assert problems(text) == [(21, 7, "services.0.readiness.port", message)]


def test_readiness_tcp_port_zero() -> None:
    text = WITH_SERVICE + "    readiness:\n      tcp:\n        port: 0\n"
    message = "port must be between 1 and 65535, got 0"
    assert problems(text) == [(22, 9, "services.0.readiness.tcp.port", message)]


def test_readiness_http_path_without_slash() -> None:
    text = WITH_SERVICE + "    readiness:\n      http:\n        port: 80\n        path: health\n"
    assert problems(text) == [(23, 9, "services.0.readiness.http.path", "must start with '/', got 'health'")]


def test_readiness_bad_log_regex() -> None:
    text = WITH_SERVICE + "    readiness:\n      log:\n        pattern: 'ready ('\n"
    message = "is not a log pattern srtd can use (RE2 syntax: no backreferences, no lookaround): missing ): ready ("
    assert problems(text) == [(22, 9, "services.0.readiness.log.pattern", message)]


def test_service_start_outside_its_vocabulary() -> None:
    text = WITH_SERVICE + "    start: later\n"
    message = "must be 'infra', 'before_workers', 'with_workers' or 'after_frontend', got 'later'"
    assert problems(text) == [(20, 12, "services.0.start", message)]


def test_service_placement_node_outside_its_vocabulary() -> None:
    text = WITH_SERVICE + "    placement:\n      node: everywhere\n"
    message = (
        "must be 'head', 'infra', 'dedicated', 'prefill', 'decode', 'agg', 'workers', 'compute' or 'all', "
        "got 'everywhere'"
    )
    assert problems(text) == [(21, 13, "services.0.placement.node", message)]


def test_service_nodes_zero() -> None:
    text = WITH_SERVICE + "    nodes: 0\n"
    assert problems(text) == [(20, 5, "services.0.nodes", "must be at least 1, got 0")]


# --------------------------------------------------------------------------- all errors of a file at once


def test_three_independent_mistakes_in_file_order() -> None:
    text = sub("  gpus_per_node: 8\n", "  gpus_per_node: eight\n")
    text = sub("    workers: 1\n", "    workers: many\n", text)
    text = text + "  placement:\n    node: last_decode\n"
    assert [str(p) for p in problems_of(text)] == [
        "r.yaml:8:18 resources.gpus_per_node: input should be a valid integer, got 'eight'",
        "r.yaml:13:14 roles.agg.workers: input should be a valid integer, got 'many'",
        "r.yaml:18:5 frontend.placement.node: last_decode is a benchmark placement; "
        "frontends use head, first_decode or dedicated",
    ]


def test_mistakes_in_several_sections_are_sorted_by_line() -> None:
    # Written out of model order: services before resources' bad value is still reported after it.
    text = WITH_SERVICE + "    start: later\n"
    text = sub("  precision: fp8\n", "  precision: fp8\n  stage: x\n", text)
    assert [(p.line, p.path) for p in problems_of(text)] == [(7, "model.stage"), (21, "services.0.start")]


# --------------------------------------------------------------------------- override files


def test_override_file_unknown_top_level_block() -> None:
    text = OVERRIDES + "overide_x:\n  name: y\n"
    message = (
        "unknown field 'overide_x'; an override file has `base`, `override_<name>` and `zip_override_<name>` blocks"
    )
    assert problems(text) == [(22, 1, "overide_x", message)]


def test_override_file_base_not_a_mapping() -> None:
    assert problems("schema: 2\nbase: [1]\noverride_a:\n  name: x\n") == [(2, 7, "base", "`base` must be a mapping")]


def test_override_block_not_a_mapping() -> None:
    assert problems(OVERRIDES + "override_x: 3\n") == [(22, 13, "override_x", "`override_x` must be a mapping")]


def test_zip_lists_of_different_lengths() -> None:
    text = OVERRIDES + "zip_override_ctx:\n  roles:\n    agg:\n      gpus: [1, 2, 4]\n      workers: [1, 2]\n"
    message = "zipped lists must have the same length: roles.agg.gpus has 3, roles.agg.workers has 2"
    assert problems(text) == [(22, 1, "zip_override_ctx", message)]


def test_zip_with_empty_lists_is_refused() -> None:
    text = OVERRIDES + "zip_override_ctx:\n  roles:\n    agg:\n      gpus: []\n"
    # Today: loads as [override_tp2] only; the zip block vanished without a word.
    assert [p.path for p in problems_of(text)] == ["zip_override_ctx"]


def test_error_in_one_variant_names_that_variant() -> None:
    text = OVERRIDES + "override_x:\n  roles:\n    agg:\n      gpus: four\n"
    (problem,) = problems_of(text)
    assert problem.variant == "override_x"
    assert str(problem) == "r.yaml:25:13 [override_x] roles.agg.gpus: input should be a valid integer, got 'four'"


def test_error_in_a_zip_variant_names_its_index() -> None:
    text = OVERRIDES + "zip_override_ctx:\n  roles:\n    agg:\n      gpus: [2, two]\n"
    (problem,) = problems_of(text)
    assert str(problem) == (
        "r.yaml:25:13 [zip_override_ctx[1]] roles.agg.gpus: input should be a valid integer, got 'two'"
    )


def test_error_in_base_is_reported_per_variant() -> None:
    text = sub("      gpus: 8\n", "      gpus: -8\n", OVERRIDES) + "override_b:\n  name: b\n"
    assert [str(p) for p in problems_of(text)] == [
        # override_tp2 replaces gpus; override_b inherits the bad one from base (line 15).
        "r.yaml:15:7 [override_b] roles.agg.gpus: must be at least 1, got -8",
    ]


def test_variant_pattern_matching_nothing() -> None:
    assert problems(OVERRIDES, variant="override_nope") == [
        (None, None, "", "no variant matches 'override_nope'; variants: override_tp2")
    ]


def test_variant_pattern_matching_nothing_names_the_file() -> None:
    (problem,) = problems_of(OVERRIDES, variant="override_nope")
    assert problem.file == FILE


# --------------------------------------------------------------------------- sweeps


def test_sweep_empty_list() -> None:
    assert problems(BASE + "sweep:\n  c: []\n") == [(18, 6, "sweep.c", "must be a non-empty list of values")]


def test_sweep_scalar_instead_of_a_list() -> None:
    assert problems(BASE + "sweep:\n  c: 3\n") == [(18, 6, "sweep.c", "must be a non-empty list of values")]


def test_sweep_empty_mapping() -> None:
    message = "`sweep` must map parameter names to lists of values"
    assert problems(BASE + "sweep: {}\n") == [(17, 8, "sweep", message)]


def test_sweep_unknown_mode() -> None:
    text = BASE + "sweep:\n  mode: random\n  parameters:\n    c: [1, 2]\n"
    assert problems(text) == [(18, 9, "sweep.mode", "must be grid or zip, got 'random'")]


def test_sweep_zip_of_different_lengths() -> None:
    text = BASE + "sweep:\n  mode: zip\n  parameters:\n    c: [1, 2]\n    d: [1]\n"
    assert problems(text) == [(18, 3, "sweep", "zipped sweep lists must have the same length")]


def test_sweep_placeholder_takes_the_value_type() -> None:
    # "{w}" becomes the int 2 (valid) and the string 'x' (invalid) in the other combination.
    text = sub("    workers: 1\n", "    workers: '{w}'\n") + "sweep:\n  w: [2, x]\n"
    (problem,) = problems_of(text)
    assert str(problem) == "r.yaml:13:14 [w=x] roles.agg.workers: input should be a valid integer, got 'x'"


def test_sweep_placeholder_inside_a_string_stays_a_string() -> None:
    text = sub("    workers: 1\n", "    workers: 'n{w}'\n") + "sweep:\n  w: [2]\n"
    assert problems(text) == [(13, 14, "roles.agg.workers", "input should be a valid integer, got 'n2'")]


def test_observability_nsys_bounds() -> None:
    text = BASE + "observability:\n  nsys:\n    report_timeout_secs: 0\n    nvtx_injection_path: lib/inject.so\n"
    assert problems(text) == [
        (19, 5, "observability.nsys.report_timeout_secs", "must be a positive number of seconds, not 0"),
        (20, 5, "observability.nsys.nvtx_injection_path", "must be an absolute path inside the container"),
    ]


def test_srun_options_may_not_set_the_flags_srtd_derives_from_the_plan() -> None:
    text = BASE + 'srun_options:\n  mem: "0"\n  nodelist: gpu-01\n  job-name: mine\n'
    assert problems(text) == [
        (19, 3, "srun_options.nodelist", "srtd sets --nodelist itself (from the plan); leave it out"),
        (20, 3, "srun_options.job-name", "srtd sets --job-name itself (from the plan); leave it out"),
    ]
    assert problems(sub("    gpus: 8\n", '    gpus: 8\n    srun_options: {output: "x"}\n')) == [
        (15, 20, "roles.agg.srun_options.output", "srtd sets --output itself (from the plan); leave it out")
    ]
