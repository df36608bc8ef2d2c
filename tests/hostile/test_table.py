"""Each row of issue 19's table of hostile inputs, with the outcome docs/exit-codes.md documents."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.hostile.helpers import EXAMPLE_JOURNAL, bounded, one_line, srtd, tree
from tests.recipe.samples import BASE

LOC = re.compile(r"^srtd: \S+:\d+:\d+ ")  # file:line:col, then the field


def write(tmp_path: Path, text: str, name: str = "r.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def alias_bomb(levels: int) -> str:
    lines = ["bomb:", "  l0: &l0 [x]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return BASE + "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    recipe = write(tmp_path, alias_bomb(10))  # ~1 KB naming 9**10 strings
    start = time.monotonic()
    result = bounded("validate", recipe, cwd=tmp_path)
    assert time.monotonic() - start < 15  # generous: it takes well under a second
    assert result.code == 2
    assert result.stderr == (
        f"{recipe}:18:12 bomb.l5.6.0.3.5.3.0: the document expands to more than 100000 values "
        "(YAML aliases copy what they name)\n"
    )


def test_an_alias_bomb_under_role_args_is_refused_by_plan(tmp_path: Path) -> None:
    levels = ["  l0: &l0 [x]"] + [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 8)]
    text = BASE.replace("    gpus: 8\n", "    gpus: 8\n    args:\n      big: *l7\n")
    recipe = write(tmp_path, "anchors:\n" + "\n".join(levels) + "\n" + text)
    result = bounded("plan", recipe, "--nodes", "n1", cwd=tmp_path)
    assert result.code == 2
    assert "expands to more than 100000 values" in one_line(result.stderr)


def test_a_million_variant_sweep_is_refused_and_variant_builds_only_one(tmp_path: Path) -> None:
    values = "[" + ", ".join(str(i) for i in range(100)) + "]"
    text = BASE.replace("name: t\n", f"name: t\nsweep:\n  a: {values}\n  b: {values}\n  c: {values}\n")
    recipe = write(tmp_path, text)
    result = bounded("validate", recipe, cwd=tmp_path)
    assert result.code == 2
    assert (
        result.stderr
        == f"{recipe}:3:1 sweep: the sweep makes 1000000 recipes, more than 1024; choose one with --variant\n"
    )
    result = bounded("plan", recipe, "--variant", "a=1,b=1,c=1", "--nodes", "n1", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert '"variant": "a=1,b=1,c=1"' in result.stdout


@pytest.mark.parametrize("name", ["../../../../tmp/escaped", "a/b", "..", "x\ty"])
def test_a_service_name_that_is_not_one_path_component_is_refused(tmp_path: Path, name: str) -> None:
    quoted = name.replace("\t", "\\t")
    recipe = write(tmp_path, BASE + f'services:\n  - name: "{quoted}"\n    command: [sleep, "1"]\n')
    result = srtd("validate", recipe)
    assert result.code == 2
    assert result.stderr.startswith(f"{recipe}:18:11 services.0.name: names a log file, so it may not hold")


def test_a_role_name_and_job_name_and_job_id_are_checked_too(tmp_path: Path) -> None:
    recipe = write(tmp_path, BASE.replace("  agg:\n", "  ../agg:\n"))
    assert srtd("validate", recipe).stderr.startswith(f"{recipe}:11:3 roles.../agg: names a log file")
    good = write(tmp_path, BASE, "good.yaml")
    result = srtd("plan", good, "--job-id", "../../x", "--nodes", "n1")
    assert (result.code, one_line(result.stderr)) == (
        2,
        "srtd: --job-id: '../../x' is not a job id: it may not be empty or hold `/`, `..` or controls",
    )


def test_a_saved_plan_writing_outside_its_log_dir_is_refused(tmp_path: Path) -> None:
    good = write(tmp_path, BASE)
    plan = srtd("plan", good, "--nodes", "n1", "--json", "--log-dir", str(tmp_path / "logs")).stdout
    edited = tmp_path / "plan.json"
    edited.write_text(plan.replace('"log": "', '"log": "../../escaped-', 1), encoding="utf-8")
    before = tree(tmp_path)
    result = srtd("run", str(edited))
    assert result.code == 2
    assert "is outside the log directory" in one_line(result.stderr)
    assert tree(tmp_path) == before  # nothing written anywhere


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ("1BAD: x", "16:7 roles.agg.env.1BAD: not an environment variable name"),
        ('"A=B": x', "16:7 roles.agg.env.A=B: not an environment variable name"),
        ('"A B": x', "16:7 roles.agg.env.A B: not an environment variable name"),
        ('A: "x\\0y"', "16:10 roles.agg.env.A: a NUL character"),
    ],
)
def test_bad_environment_names_and_values_are_refused_at_load(tmp_path: Path, env: str, line: str) -> None:
    recipe = write(tmp_path, BASE.replace("    gpus: 8\n", f"    gpus: 8\n    env:\n      {env}\n"))
    for command in ("validate", "plan"):
        result = srtd(command, recipe, "--nodes", "n1") if command == "plan" else srtd(command, recipe)
        assert result.code == 2
        assert f"{recipe}:{line}" in one_line(result.stderr)


def test_a_nul_in_an_argv_item_is_refused_before_run_starts_anything(tmp_path: Path) -> None:
    recipe = write(tmp_path, BASE + 'services:\n  - name: s\n    command: [sleep, "1\\0"]\n')
    result = srtd("run", "--local", recipe, "--log-dir", str(tmp_path / "logs"))
    assert result.code == 2
    assert one_line(result.stderr) == f"srtd: {recipe}:19:22 services.0.command.1: a NUL character; " + (
        "no argument, environment value or path can hold one"
    )
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory"])
def test_a_recipe_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "r.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path(kind)
    what = {"fifo": "a FIFO", "/dev/zero": "a character device", "directory": "a directory"}[kind]
    for command in ("validate", "plan", "migrate"):
        result = bounded(command, str(path), cwd=tmp_path)
        assert result.code == 2
        assert one_line(result.stderr).endswith(f"{path}: is {what}, not a recipe file")


def test_a_fifo_journal_and_cluster_file_are_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "events.jsonl")
    for args in (("timeline", str(tmp_path)), ("attach", "--replay", str(tmp_path))):
        result = bounded(*args, cwd=tmp_path)
        assert result.code == 4
        assert one_line(result.stderr) == f"srtd: {tmp_path}/events.jsonl: is a FIFO, not a regular file; refusing it"
    recipe = write(tmp_path, BASE)
    os.mkfifo(tmp_path / "c.yaml")
    result = bounded("validate", recipe, "--cluster-config", str(tmp_path / "c.yaml"), cwd=tmp_path)
    assert result.code == 2
    assert one_line(result.stderr).endswith(f"{tmp_path}/c.yaml: is a FIFO, not a cluster settings file")


def test_migrate_onto_a_missing_directory_or_a_directory_is_exit_3(tmp_path: Path) -> None:
    v1 = write(tmp_path, "name: x\nbackend:\n  type: sglang\n", "v1.yaml")
    result = srtd("migrate", v1, "-o", str(tmp_path / "nodir" / "x.yaml"))
    assert (result.code, result.stderr) == (
        3,
        f"srtd: {tmp_path}/nodir/x.yaml: cannot write: No such file or directory\n",
    )
    result = srtd("migrate", v1, "-o", str(tmp_path))
    assert (result.code, result.stderr) == (3, f"srtd: {tmp_path}: is a directory; -o names the file to write\n")
    (tmp_path / "file").write_text("")
    result = srtd("migrate", v1, "-o", str(tmp_path / "file" / "x.yaml"))
    assert (result.code, result.stderr) == (3, f"srtd: {tmp_path}/file/x.yaml: cannot write: Not a directory\n")
    assert (tmp_path / "v1.yaml").read_text() == "name: x\nbackend:\n  type: sglang\n"


def test_one_garbage_line_in_a_journal_is_skipped_with_its_line_number(tmp_path: Path) -> None:
    lines = EXAMPLE_JOURNAL.read_text().splitlines(keepends=True)
    lines.insert(3, "{garbage\n")
    (tmp_path / "events.jsonl").write_text("".join(lines))
    result = srtd("timeline", str(tmp_path), "--no-svg", "--json")
    assert result.code == 0
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1
    assert warnings[0].startswith(f"srtd: warning: {tmp_path}/events.jsonl:4: not an event: ")
    assert "For further information" not in result.stderr


@pytest.mark.parametrize("ts", ["NaN", "Infinity", "-1", "1e999"])
def test_a_non_finite_or_absurd_number_in_a_journal_is_skipped(tmp_path: Path, ts: str) -> None:
    lines = EXAMPLE_JOURNAL.read_text().splitlines(keepends=True)
    lines[2] = re.sub(r'"ts":[0-9.]+', f'"ts":{ts}', lines[2])
    (tmp_path / "events.jsonl").write_text("".join(lines))
    result = srtd("attach", "--replay", str(tmp_path), "--json")
    assert result.code == 0
    assert result.stderr.startswith(f"srtd: warning: {tmp_path}/events.jsonl:3: not an event: ts: ")


def test_srtd_containers_that_is_not_json_is_one_line_exit_2(tmp_path: Path) -> None:
    result = srtd("validate", write(tmp_path, BASE), env={"SRTD_CONTAINERS": "{bad"})
    assert (result.code, result.stderr) == (
        2,
        'srtd: SRTD_CONTAINERS: not valid JSON for this setting (a mapping is written as {"key": "value"})\n',
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("gpus_per_node: -8", "1:16 gpus_per_node: input should be greater than or equal to 1, got -8"),
        ("gpus_per_node: 0", "1:16 gpus_per_node: input should be greater than or equal to 1, got 0"),
        ("kill_wait_seconds: -5", "1:20 kill_wait_seconds: input should be greater than or equal to 0, got -5"),
        ("early_warning_seconds: -100", "1:24 early_warning_seconds: input should be greater than or equal to 1"),
        ("default_time_limit: forever", "1:21 default_time_limit: not a Slurm time limit"),
    ],
)
def test_cluster_numbers_and_time_limits_are_validated(tmp_path: Path, setting: str, message: str) -> None:
    cluster = write(tmp_path, setting + "\n", "c.yaml")
    result = srtd("plan", write(tmp_path, BASE), "--nodes", "n1", "--cluster-config", cluster)
    assert result.code == 2
    assert one_line(result.stderr).startswith(f"srtd: {cluster}:{message}")


def test_slurm_time_formats_are_accepted(tmp_path: Path) -> None:
    for value in ("30", "30:00", "01:00:00", "1-0", "1-02:00", "2-00:00:00", "UNLIMITED"):
        cluster = write(tmp_path, f'default_time_limit: "{value}"\n', "c.yaml")
        assert srtd("validate", write(tmp_path, BASE), "--cluster-config", cluster).code == 0, value


def test_a_nested_variable_of_a_plain_setting_is_refused(tmp_path: Path) -> None:
    result = srtd("validate", write(tmp_path, BASE), env={"SRTD_GPUS_PER_NODE__X": "1"})
    assert (result.code, result.stderr) == (
        2,
        "srtd: SRTD_GPUS_PER_NODE__X: SRTD_GPUS_PER_NODE is not a mapping, so it has no nested X\n",
    )
    assert srtd("validate", write(tmp_path, BASE), env={"SRTD_CONTAINERS__X": "img"}).code == 0


@pytest.mark.parametrize(("field", "value", "col"), [("concurrency", 0, 16), ("num_requests", -1, 17)])
def test_toy_benchmark_counts_are_validated_not_defaulted(tmp_path: Path, field: str, value: int, col: int) -> None:
    text = Path("recipes/local/demo.yaml").read_text()
    text = re.sub(rf"  {field}: \d+", f"  {field}: {value}", text)
    recipe = write(tmp_path, text)
    line = text.splitlines().index(f"  {field}: {value}") + 1
    result = srtd("validate", recipe)
    assert result.code == 2
    assert result.stderr.startswith(
        f"{recipe}:{line}:{col} benchmark.{field}: input should be greater than or equal to 1"
    )


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        (
            "    gpus: 8\n",
            "    gpus: 8\n    restart: {policy: on-failure, backoff_seconds: .nan}\n",
            "15:52 roles.agg.restart.backoff_seconds: input should be a finite number, got nan",
        ),
        (
            "  gpus_per_node: 8\n",
            "  gpus_per_node: 100000\n",
            "8:3 resources.gpus_per_node: must be 1 to 1024, got 100000",
        ),
        (
            "  agg:\n",
            "  agg:\n    restart: {policy: always, max_restarts: -1}\n",
            "12:31 roles.agg.restart.max_restarts: must be 0 or more, got -1",
        ),
    ],
)
def test_recipe_numbers_are_finite_and_in_range(tmp_path: Path, before: str, after: str, message: str) -> None:
    recipe = write(tmp_path, BASE.replace(before, after))
    result = srtd("validate", recipe)
    assert result.code == 2
    assert result.stderr.startswith(f"{recipe}:{message}"), result.stderr
