"""Issue 32's settings rows: a cluster value is blamed on the cluster file or its SRTD_* variable, never the recipe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hostile.helpers import one_line, srtd
from tests.hostile.test_table import write
from tests.recipe.samples import BASE

DOCS = Path(__file__).parent.parent.parent / "docs"
README = DOCS.parent / "README.md"

# A valid value of every SRTD_* variable the docs name; a variable documented later
# without a row here fails the test below, so each is tried.
VALID = {
    "SRTD_ATTACH_QUEUE": "64",
    "SRTD_ATTEMPT": "0",
    "SRTD_BINARIES": '{"etcd": "/usr/bin/etcd"}',
    "SRTD_CLUSTER_CONFIG": "",  # the test writes the file
    "SRTD_COLLECTOR_READ_TOKEN": "read-secret",
    "SRTD_COLLECTOR_TOKEN": "write-secret",
    "SRTD_CONTAINERS": '{"sglang": "img.sqsh"}',
    "SRTD_CONTAINERS__SGLANG": "img.sqsh",
    "SRTD_DYNAMO_STACK": "/tmp/dynamo-stack",
    "SRTD_JOB_ID": "42",
    "SRTD_LOG_DIR": "/tmp/logs",
    "SRTD_LOG_LAYOUT": "flat",
    "SRTD_LOG_WATCH": "poll",
    "SRTD_REGEN_GOLDEN": "1",
    "SRTD_REPORTING": '{"status": {"endpoint": "http://collector:8080"}}',
    "SRTD_REPORTING__STATUS__ENDPOINT": "http://collector:8080",
    "SRTD_REPORTING__STATUS__TOKEN_ENV": "MY_TOKEN",
    "SRTD_NODE": "node2",  # set by preflight in its GPU query's environment
    "SRTD_RUNTIME_DIR": "/tmp/srtd-runtime",
    "SRTD_TEST_SHARED": "1",  # the test suite's own namespace
    "SRTD_UNIT": "agg_0",
}
# Named by the docs as what is refused, or as a prefix: not variables to set.
REFUSED_EXAMPLES = {"SRTD_GPUS_PER_NODE__X", "SRTD_TEST_"}


def documented_variables() -> set[str]:
    names: set[str] = set()
    for page in [*DOCS.glob("*.md"), README]:
        names.update(re.findall(r"\bSRTD_[A-Z0-9_]+", page.read_text(encoding="utf-8")))
    return names - REFUSED_EXAMPLES


def test_every_documented_srtd_variable_is_accepted_with_a_valid_value(tmp_path: Path) -> None:
    documented = documented_variables()
    assert {"SRTD_LOG_WATCH", "SRTD_COLLECTOR_TOKEN"} <= documented
    assert documented <= set(VALID), f"documented but not tried here: {sorted(documented - set(VALID))}"
    recipe = write(tmp_path, BASE)
    cluster = write(tmp_path, "cluster: c\n", "c.yaml")
    for name in sorted(documented):
        value = VALID[name] or cluster
        result = srtd("validate", recipe, env={name: value})
        assert result.code == 0, f"{name}={value}: {result.stderr}"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SRTD_REPORTING", '{"status": {"endpoint": 3}}', "SRTD_REPORTING: status.endpoint: input should be a valid"),
        ("SRTD_CONTAINERS", '{"a": 1}', "SRTD_CONTAINERS: a: input should be a valid string, got 1"),
        ("SRTD_PORT_OFFSET", "-1", "SRTD_PORT_OFFSET: input should be greater than or equal to 0, got '-1' or "),
        ("SRTD_DEFAULT_SBATCH_DIRECTIVES", '{"x": "a\\nb"}', "SRTD_DEFAULT_SBATCH_DIRECTIVES: x: must be one line"),
        ("SRTD_VISIBLE_DEVICES_ENV", "1 X", "SRTD_VISIBLE_DEVICES_ENV: not an environment variable name, got '1 X'"),
        ("SRTD_GPUS_PER_NODE", "9" * 5000, "SRTD_GPUS_PER_NODE: unable to parse input string as an integer"),
    ],
)
def test_a_variable_error_names_the_variable_not_a_pydantic_path(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    result = srtd("validate", write(tmp_path, BASE), env={variable: value})
    assert result.code == 2
    assert one_line(result.stderr).startswith(f"srtd: {message}")
    assert len(result.stderr) < 400  # a long value is shown in part


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('default_sbatch_directives: {x: "a\\nb"}', "1:29 default_sbatch_directives.x: must be one line, got 'a\\nb'"),
        ('default_partition: "a\\nb"', "1:1 default_partition: must be one line, got 'a\\nb'"),
        (
            'default_srun_options: {"a b": x}',
            "1:24 default_srun_options.a b: not an option name (letters, digits and `-`)",
        ),
        ('visible_devices_env: "1 BAD"', "1:1 visible_devices_env: not an environment variable name, got '1 BAD'"),
    ],
)
def test_a_cluster_value_that_cannot_be_used_is_refused_at_its_cluster_line(
    tmp_path: Path, setting: str, message: str
) -> None:
    cluster = write(tmp_path, setting + "\n", "c.yaml")
    for args in (("validate", write(tmp_path, BASE)), ("submit", "--dry-run", write(tmp_path, BASE))):
        result = srtd(*args, "--cluster-config", cluster)
        assert result.code == 2
        assert one_line(result.stderr) == f"srtd: {cluster}:{message}"


def test_a_fit_problem_from_the_clusters_gpus_per_node_names_where_it_is_set(tmp_path: Path) -> None:
    recipe = write(tmp_path, BASE.replace("  gpus_per_node: 8\n", "  gpu_type: h100\n"))
    cluster = write(tmp_path, "gpus_per_node: 4\n", "c.yaml")
    fit = f"srtd: {recipe}:13:5 roles.agg.workers: 1 worker(s) of 8 GPU(s) do not fit on 1 node(s) of 4 GPUs"
    result = srtd("plan", recipe, "--nodes", "n1", "--cluster-config", cluster)
    assert (result.code, one_line(result.stderr)) == (2, f"{fit} (gpus_per_node 4 is set at {cluster}:1:16)")
    result = srtd("submit", "--dry-run", recipe, env={"SRTD_GPUS_PER_NODE": "4"})
    assert (result.code, one_line(result.stderr)) == (2, f"{fit} (gpus_per_node 4 is set at SRTD_GPUS_PER_NODE)")
