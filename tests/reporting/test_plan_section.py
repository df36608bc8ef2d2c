"""`reporting.status` from the recipe and the cluster settings into the plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from srtd.cluster import Cluster, load_cluster
from srtd.errors import ClusterConfigError, RecipeError
from srtd.plan import build_plan
from srtd.recipe import load_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "recipes" / "features" / "status-reporting.yaml"
TOKEN = "tok-plan-5e1d"


def recipe(reporting: str = "") -> str:
    text = EXAMPLE.read_text()
    head = text[: text.index("\nreporting:") + 1]
    return head + reporting


def plan_of(text: str, cluster: Cluster | None = None) -> dict[str, object]:
    [loaded] = load_text(text, "r.yaml")
    return build_plan(loaded, cluster or Cluster(), job_id="9", local=True, log_dir="/logs").to_json()


def test_the_example_plans_endpoint_variable_prefix_and_started_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRTCTL_STATUS_TOKEN", TOKEN)
    [loaded] = load_text(EXAMPLE.read_text(), str(EXAMPLE))
    plan = build_plan(loaded, Cluster(cluster="lab"), job_id="9", local=True, log_dir="/logs")
    assert plan.reporting is not None
    assert plan.reporting.as_json() == {
        "endpoints": ["http://127.0.0.1:8080"],
        "token_env": "SRTCTL_STATUS_TOKEN",
        "job_id_prefix": "laptop:",
        "cluster": "lab",
        "metadata": {
            "job_name": "toy-status",
            "cluster": "lab",
            "model": {"path": "hf:srtd/toy", "precision": "bf16"},
            "resources": {"gpu_type": "cpu", "gpus_per_node": 2, "agg_workers": 1, "agg_nodes": 1, "gpus_per_agg": 1},
            "benchmark_type": "toy",
            "backend_type": "toy",
            "frontend_type": "toy-router",
            "head_node": "node1",
            "log_dir": "/logs",
        },
    }
    assert TOKEN not in plan.dumps()
    # no unit inherits the token: only srtd talks to the collectors
    assert all(u.unset_env == ("SRTCTL_STATUS_TOKEN",) for u in plan.units)


def test_a_plan_without_reporting_has_no_reporting_key_and_units_keep_their_env() -> None:
    plan = plan_of(recipe())
    assert "reporting" not in plan
    assert all(u["unset_env"] == [] for u in plan["units"])  # type: ignore[attr-defined,index]


def test_the_cluster_settings_report_every_job_and_the_recipe_wins_field_by_field() -> None:
    cluster = Cluster(
        cluster="lab",
        reporting={"status": {"endpoints": ("http://a/", "http://b"), "token_env": "LAB_TOKEN", "job_id_prefix": "a:"}},
    )
    inherited = plan_of(recipe(), cluster)["reporting"]
    assert inherited["endpoints"] == ["http://a", "http://b"]  # type: ignore[index]
    assert (inherited["token_env"], inherited["job_id_prefix"]) == ("LAB_TOKEN", "a:")  # type: ignore[index]
    own = plan_of(recipe("reporting:\n  status:\n    endpoint: http://mine/\n    endpoints: [http://mine]\n"), cluster)
    assert own["reporting"]["endpoints"] == ["http://mine"]  # type: ignore[index]
    assert own["reporting"]["token_env"] == "LAB_TOKEN"  # type: ignore[index]
    assert "reporting" not in plan_of(recipe("reporting:\n  status:\n    endpoints: []\n"), cluster)


@pytest.fixture
def no_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No SRTD_* variable of the machine's leaks into the cluster settings."""
    for name in list(os.environ):
        if name.startswith("SRTD_"):
            monkeypatch.delenv(name)


@pytest.mark.usefixtures("no_settings_env")
def test_the_cluster_file_and_its_environment_variables_set_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "srtslurm.yaml"
    path.write_text("cluster: lab\nreporting:\n  status:\n    endpoint: http://collector:8080\n")
    cluster, _ = load_cluster(path)
    assert plan_of(recipe(), cluster)["reporting"]["endpoints"] == ["http://collector:8080"]  # type: ignore[index]
    monkeypatch.setenv("SRTD_REPORTING__STATUS__ENDPOINT", "http://other:9")
    cluster, _ = load_cluster(path)
    assert plan_of(recipe(), cluster)["reporting"]["endpoints"] == ["http://other:9"]  # type: ignore[index]


def test_logging_stream_interval_is_accepted_with_a_warning() -> None:
    plan = plan_of(recipe("reporting:\n  status:\n    endpoint: http://c\n    logging-stream-interval: 30\n"))
    assert plan["warnings"] == [
        "reporting.status.logging-stream-interval: raw log uploads are not supported yet; ignored"
    ]


@pytest.mark.parametrize(
    ("block", "where"),
    [
        ("    endpoint: status.example.com\n", "reporting.status.endpoint"),
        ("    endpoints: [http://ok, 'ftp://x']\n", "reporting.status.endpoints.1"),
        ("    token_env: 'Bearer abc.def'\n", "reporting.status.token_env"),
    ],
)
def test_bad_collector_settings_are_refused_with_their_location(block: str, where: str) -> None:
    text = recipe("reporting:\n  status:\n" + block)
    line = text.count("\n", 0, text.index(block)) + 1
    with pytest.raises(RecipeError) as err:
        load_text(text, "r.yaml")
    assert f"r.yaml:{line}:" in str(err.value)
    assert where in str(err.value)
    assert json.dumps(str(err.value))  # one readable message


@pytest.mark.usefixtures("no_settings_env")
def test_a_bad_collector_in_the_cluster_settings_is_refused_with_its_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "srtslurm.yaml"
    path.write_text("cluster: lab\nreporting:\n  status:\n    endpoint: ftp://x\n")
    with pytest.raises(ClusterConfigError) as err:
        load_cluster(path)
    assert str(err.value) == (
        f"{path}:4:5 reporting.status.endpoint: must be an http:// or https:// URL, got 'ftp://x'"
    )
    path.write_text("cluster: lab\n")
    monkeypatch.setenv("SRTD_REPORTING__STATUS__TOKEN_ENV", "a b")
    with pytest.raises(ClusterConfigError) as err:
        load_cluster(path)
    assert str(err.value).startswith("SRTD_REPORTING__STATUS__TOKEN_ENV: must be the name of an environment variable")
