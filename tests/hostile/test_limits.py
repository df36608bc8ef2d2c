"""Issue 32's budgets: whatever a recipe multiplies is refused at load, at its line, in bounded time and memory.

Each case runs in a subprocess under the address-space and CPU limits of `bounded`
(1 GiB, 20 s): before these budgets, each one ran for tens of seconds, died of memory
or ended in `internal error` (exit 70).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.hostile.helpers import bounded, srtd
from tests.hostile.test_table import write
from tests.recipe.samples import BASE

GENEROUS = 15  # seconds: each refusal takes well under one


def refused(tmp_path: Path, text: str, *args: str) -> str:
    """The stderr of `srtd validate` (or `args`) on `text`, which must be refused with exit 2 in bounded time."""
    recipe = write(tmp_path, text)
    start = time.monotonic()
    result = bounded(*(args or ("validate",)), recipe, cwd=tmp_path)
    assert time.monotonic() - start < GENEROUS
    assert result.code == 2, result.stderr[:2000]
    assert "Traceback" not in result.stderr
    return result.stderr.replace(recipe, "r.yaml")


def test_an_integer_longer_than_python_reads_is_refused_at_its_place(tmp_path: Path) -> None:
    text = BASE.replace("workers: 1", "workers: " + "9" * 5000)
    assert refused(tmp_path, text) == (
        "r.yaml:13:14: invalid YAML: an integer of 5000 digits, more than 100 (quote it if it is text)\n"
    )


@pytest.mark.parametrize(
    ("nesting", "where"),
    [
        ("x: " + "[" * 2000 + "]" * 2000, "17:67"),  # 13 s in ruamel's scanner before
        ("x: " + "{a: " * 2000 + "}" * 2000, "17:256"),
        ("x:\n" + "- " * 2000 + "y", "18:127"),
        ("".join(" " * i + f"k{i}:\n" for i in range(100)) + " " * 100 + "v: 1", "81:65"),
    ],
    ids=["flow-list", "flow-map", "compact-list", "block-map"],
)
def test_deep_nesting_is_refused_before_the_parser_reads_it(tmp_path: Path, nesting: str, where: str) -> None:
    text = BASE + nesting + "\n"
    assert refused(tmp_path, text) == f"r.yaml:{where}: invalid YAML: nested 65 levels deep here, more than 64\n"


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        ("nodes: 1", "nodes: 1000000000000", "12:5 roles.agg.nodes: must be at most 1024 (a job's node limit)"),
        ("nodes: 1", "nodes: 10000", "12:5 roles.agg.nodes: must be at most 1024 (a job's node limit), got 10000"),
        ("workers: 1", "workers: 5000", "13:5 roles.agg.workers: must be at most 1024 (a job's worker limit)"),
        (
            "    nodes: 1\n    workers: 1\n    gpus: 8\n",
            "    workers: 1000\n    gpus: 16\n",
            "11:3 roles.agg: the recipe needs 2000 nodes (agg 2000), more than 1024",
        ),
        (
            "  agg:\n    nodes: 1\n    workers: 1\n    gpus: 8\n",
            "".join(f"  {role}:\n    nodes: 100\n    workers: 600\n    gpus: 1\n" for role in ("prefill", "decode")),
            "10:1 roles: the roles have 1200 workers in all, more than 1024 (a job's limit)",
        ),
    ],
    ids=["tera-nodes", "ten-thousand-nodes", "workers", "derived-nodes", "workers-in-all"],
)
def test_node_and_worker_counts_are_bounded_at_load(tmp_path: Path, before: str, after: str, message: str) -> None:
    assert refused(tmp_path, BASE.replace(before, after)).startswith(f"r.yaml:{message}")


def test_a_4096_point_sweep_is_refused_before_any_recipe_is_built(tmp_path: Path) -> None:
    values = ", ".join(str(i) for i in range(4096))
    text = BASE.replace("name: t\n", f"name: t\nsweep:\n  a: [{values}]\n")
    assert refused(tmp_path, text) == (
        "r.yaml:3:1 sweep: the sweep makes 4096 recipes, more than 1024; choose one with --variant\n"
    )


def test_a_many_fold_substitution_is_measured_before_it_is_made(tmp_path: Path) -> None:
    value = "x" * 40_000
    text = BASE.replace("name: t\n", f"name: t\nsweep:\n  a: ['{value}', y]\nslurm:\n  account: \"{'{a}' * 15_000}\"\n")
    assert refused(tmp_path, text) == (
        f"r.yaml:6:12 [a={'x' * 95}...] slurm.account: the sweep's values make this string "
        "600000000 characters, more than 1048576\n"
    )


@pytest.mark.parametrize(
    ("before", "after", "where"),
    [
        ("name: t\n", 'name: "t\\ud800"\n', "2:7 name"),
        ("    gpus: 8\n", '    gpus: 8\n    env:\n      A: "\\udfff"\n', "16:10 roles.agg.env.A"),
        ("    gpus: 8\n", '    gpus: 8\n    env:\n      "\\ud800": x\n', "16:7 roles.agg.env"),
    ],
    ids=["name", "env-value", "env-key"],
)
def test_a_lone_surrogate_is_a_recipe_error_at_its_place(tmp_path: Path, before: str, after: str, where: str) -> None:
    recipe = write(tmp_path, BASE.replace(before, after))
    for args in (("validate", recipe), ("plan", recipe, "--nodes", "n1")):
        result = srtd(*args)
        assert result.code == 2, result.stderr
        assert f"{recipe}:{where}" in result.stderr
        assert "half of a UTF-16 surrogate pair, which is not a character" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            BASE.replace("name: t\n", "name: t\nsweep:\n  a: [1, 2, 1]\n"),
            "r.yaml:4:13 sweep.a.2: 1 is listed twice (also item 0, at 4:7): the two recipes would be one job\n",
        ),
        (
            BASE.replace("name: t\n", "name: t\nsweep:\n  a: [1, '1']\n"),
            "r.yaml:4:10 sweep.a.1: '1' is listed twice (also item 0, at 4:7): the two recipes would be one job\n",
        ),
        (
            BASE.replace(
                "name: t\n", "name: t\nsweep:\n  mode: zip\n  parameters:\n    a: [1, 2, 1]\n    b: [x, y, x]\n"
            ),
            "r.yaml:6:15 sweep.parameters.a.2: sweep point 2 (a=1,b=x) repeats point 0, at 6:9: "
            "the two recipes would be one job\n",
        ),
        (
            "schema: 2\nbase:\n  name: t\noverride_a:\n  name: u\noverride_b:\n  name: u\n",
            "r.yaml:6:1 override_b: override_b makes the same recipe as override_a, at 4:1: "
            "the two recipes would be one job\n",
        ),
    ],
    ids=["grid", "grid-same-name", "zip", "override"],
)
def test_repeated_sweep_points_and_variants_are_refused(tmp_path: Path, text: str, message: str) -> None:
    assert refused(tmp_path, text) == message


def sweep(points: int, text: str = BASE) -> str:
    return text.replace("name: t\n", f"name: t\nsweep:\n  a: [{', '.join(str(i) for i in range(points))}]\n")


def test_one_mistake_in_every_recipe_of_a_sweep_is_said_once_with_a_count(tmp_path: Path) -> None:
    recipe = write(tmp_path, sweep(100, BASE.replace("nodes: 1", "nodes: -1")))
    for args in (("validate", recipe), ("plan", recipe, "--all")):
        result = srtd(*args)
        assert result.code == 2
        assert result.stderr.removeprefix("srtd: ") == (
            f"{recipe}:14:5 [a=0 and 99 more recipes] roles.agg.nodes: must be 0 or more, got -1\n"
        )


def test_one_warning_of_every_recipe_of_a_sweep_is_said_once_with_a_count(tmp_path: Path) -> None:
    recipe = write(tmp_path, sweep(100))
    for args in (("validate", recipe), ("plan", recipe, "--all", "--slurm")):  # validate plans for Slurm
        result = srtd(*args)
        assert result.code == 0
        assert result.stderr.splitlines() == [
            f"{recipe} [a=0 and 99 more recipes]: warning: service 'process-exporter' is left out: no binary: "
            "set `binaries.process-exporter` in the cluster settings or `options.binary`"
        ]


def test_one_port_clash_on_every_node_is_said_once_with_a_count(tmp_path: Path) -> None:
    text = BASE.replace("nodes: 1", "nodes: 64").replace("workers: 1", "workers: 64")
    text += "services:\n  - name: x\n    command: [sleep, '1']\n"
    text += "    placement: {node: all}\n    readiness: {port: 9101}\n"
    recipe = write(tmp_path, text)
    result = srtd("plan", recipe, "--slurm")
    assert (result.code, result.stderr) == (
        2,
        f"srtd: {recipe}:21:17 services.0.readiness.port: port 9101 on node1: both service_node-exporter_node1 "
        "and service_x_node1 listen on it (and 63 more like it)\n",
    )


@pytest.mark.parametrize(
    ("nodes", "number", "name"),
    [
        ("a b", 1, "a b"),
        ("n1,$(reboot)", 2, "$(reboot)"),
        ("n1,n2,-x", 3, "-x"),
        ("a..b", 1, "a..b"),
        ("x" * 64, 1, "x" * 64),
    ],
)
def test_a_node_list_entry_that_is_not_a_host_name_is_refused(
    tmp_path: Path, nodes: str, number: int, name: str
) -> None:
    recipe = write(tmp_path, BASE)
    expected = f"node {number} of the list, {name!r}, is not a host name (labels of letters, digits, `-` and `_`, "
    expected += "joined by `.`)"
    result = srtd("plan", recipe, "--nodes", nodes)
    assert (result.code, result.stderr) == (2, f"srtd: --nodes: {expected}\n")
    result = srtd("plan", recipe, env={"SLURM_JOB_NODELIST": nodes, "SLURM_JOB_ID": "7"})  # inside an allocation
    assert (result.code, result.stderr) == (2, f"srtd: SLURM_JOB_NODELIST: {expected}\n")


@pytest.mark.parametrize("nodes", ["node_01", "gpu-[01-02].cluster.local", "A1,b2", "x" * 63])
def test_slurm_node_names_are_accepted(tmp_path: Path, nodes: str) -> None:
    assert srtd("plan", write(tmp_path, BASE), "--nodes", nodes).code == 0
