"""`srtd validate`, `srtd schema` and `srtd --version`, run through click's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import srtd
import srtd.cli._commands
from srtd.cli._main import cli
from srtd.recipe import recipe_json_schema
from tests.recipe.samples import BASE, OVERRIDES, sub

# Without the metrics scraper's exporters the plan of BASE has no warnings.
QUIET = "observability: {tachometer: {enabled: false}}\n"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    path = tmp_path / "good.yaml"
    path.write_text(BASE + QUIET)
    return path


@pytest.fixture
def invalid(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    text = sub("    workers: 1\n", "    workers: many\n")
    path.write_text(text + "frontnd: {}\n")
    return path


def test_validate_a_valid_file(valid: Path) -> None:
    result = run("validate", str(valid))
    assert result.exit_code == 0
    assert result.stdout == f"{valid}: valid (1 recipe)\n"
    assert result.stderr == ""


def test_validate_an_override_file_counts_its_recipes(tmp_path: Path) -> None:
    path = tmp_path / "o.yaml"
    path.write_text(OVERRIDES + "override_b:\n  name: b\n")
    result = run("validate", str(path))
    assert result.exit_code == 0
    assert result.stdout == f"{path}: valid (2 recipes)\n"


def test_validate_an_invalid_file_prints_one_line_per_problem(invalid: Path) -> None:
    result = run("validate", str(invalid))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{invalid}:13:14 roles.agg.workers: input should be a valid integer, got 'many'",
        f"{invalid}:17:1 frontnd: unknown field 'frontnd'; did you mean 'frontend'?",
    ]


def test_validate_an_invalid_variant_names_it(tmp_path: Path) -> None:
    path = tmp_path / "o.yaml"
    path.write_text(OVERRIDES + "override_x:\n  roles:\n    agg:\n      gpus: four\n")
    result = run("validate", str(path))
    assert result.exit_code == 2
    assert result.stderr == f"{path}:25:13 [override_x] roles.agg.gpus: input should be a valid integer, got 'four'\n"


def test_validate_runs_the_plan_checks_too(tmp_path: Path) -> None:
    # The frontend registry, not the recipe model, knows which frontend types exist.
    path = tmp_path / "f.yaml"
    path.write_text(sub("  type: sglang-router\n", "  type: bogus-router\n"))
    result = run("validate", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{path}:16:3 frontend.type: unknown frontend 'bogus-router'; ")
    assert "known: atom, atomesh, dynamo, none," in line


def test_validate_several_files(valid: Path, invalid: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    result = run("validate", str(valid), str(invalid), str(missing))
    assert result.exit_code == 2
    assert result.stdout == f"{valid}: valid (1 recipe)\n"
    assert result.stderr.splitlines() == [
        f"{invalid}:13:14 roles.agg.workers: input should be a valid integer, got 'many'",
        f"{invalid}:17:1 frontnd: unknown field 'frontnd'; did you mean 'frontend'?",
        f"{missing}: no such file",
    ]


def test_validate_several_valid_files(valid: Path, tmp_path: Path) -> None:
    other = tmp_path / "sweep.yaml"
    other.write_text(BASE + QUIET + "sweep:\n  c: [1, 2, 3]\n")
    result = run("validate", str(valid), str(other))
    assert result.exit_code == 0
    assert result.stdout == f"{valid}: valid (1 recipe)\n{other}: valid (3 recipes)\n"


def test_validate_json(valid: Path, invalid: Path) -> None:
    result = run("validate", "--json", str(valid), str(invalid))
    assert result.exit_code == 2
    assert result.stderr == ""
    assert json.loads(result.stdout) == [
        {"file": str(valid), "valid": True, "recipes": 1, "problems": [], "warnings": []},
        {
            "file": str(invalid),
            "valid": False,
            "recipes": 0,
            "warnings": [],
            "problems": [
                {
                    "file": str(invalid),
                    "line": 13,
                    "column": 14,
                    "path": "roles.agg.workers",
                    "variant": None,
                    "message": "input should be a valid integer, got 'many'",
                },
                {
                    "file": str(invalid),
                    "line": 17,
                    "column": 1,
                    "path": "frontnd",
                    "variant": None,
                    "message": "unknown field 'frontnd'; did you mean 'frontend'?",
                },
            ],
        },
    ]


def test_validate_json_all_valid_exits_0(valid: Path) -> None:
    result = run("validate", "--json", str(valid))
    assert result.exit_code == 0
    assert json.loads(result.stdout) == [
        {"file": str(valid), "valid": True, "recipes": 1, "problems": [], "warnings": []}
    ]


def test_validate_needs_a_file() -> None:
    result = run("validate")
    assert result.exit_code == 2
    assert "Missing argument 'RECIPES...'" in result.stderr


def test_schema_prints_the_json_schema() -> None:
    result = run("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert "$defs" in schema
    assert "RoleConfig" in schema["$defs"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "srtd recipe"
    assert schema == json.loads(json.dumps(recipe_json_schema()))


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"srtd, version {srtd.__version__}\n"


SELECTOR_TYPOS = [
    (sub("engine: sglang\n", "engine: sglangx\n"), "9:9 engine.type: unknown type 'sglangx'; did you mean 'sglang'?"),
    (
        sub("  type: sglang-router\n", "  type: sglang-ruoter\n"),
        "16:3 frontend.type: unknown frontend 'sglang-ruoter'; did you mean 'sglang-router'?",
    ),
    (
        BASE + "benchmark:\n  type: sabench\n",
        "18:3 benchmark.type: unknown benchmark 'sabench'; did you mean 'sa-bench'?",
    ),
    (
        BASE + "services:\n  - name: e\n    type: etdc\n",
        "19:5 services.0.type: unknown service type 'etdc'; did you mean 'etcd'?",
    ),
    (
        BASE + "telemetry:\n  dcgm_exporter:\n    kind: dcmg\n    container_image: x\n    port: 9400\n",
        "19:5 telemetry.dcgm_exporter.kind: unknown telemetry exporter kind 'dcmg'; did you mean 'dcgm'?",
    ),
]


@pytest.mark.parametrize(
    ("text", "said"), SELECTOR_TYPOS, ids=["engine", "frontend", "benchmark", "service", "exporter"]
)
def test_every_name_that_selects_behaviour_is_checked_with_a_did_you_mean(tmp_path: Path, text: str, said: str) -> None:
    """A misspelt selector is refused by validate, located, with the closest name and every known one."""
    path = tmp_path / "r.yaml"
    path.write_text(text)
    result = run("validate", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{path}:{said} known: ")
