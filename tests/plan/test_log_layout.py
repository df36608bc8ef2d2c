"""The log layout (`log_layout: split | flat`): one table decides where every log and file goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.layout import DEFAULT_LAYOUT, Place, directory, log_file
from srtd.unit import Plan
from tests.plan._util import HEAD, plan

HEAD_TACH = HEAD.replace("observability: {tachometer: {enabled: false}}\n", "")
JOB = """\
engine: vllm
roles:
  agg: {nodes: 1, workers: 2, gpus: 4}
frontend: {type: dynamo, enable_multiple_frontends: false}
services:
  - {name: web, command: [python3, -m, http.server],
     source: {git: https://example.com/web.git, rev: v1.0}, build_command: [make]}
benchmark: {type: sa-bench, isl: 8, osl: 8, concurrencies: [1]}
"""
LOGS = "outputs/local/logs"


def test_the_table_of_each_layout() -> None:
    assert DEFAULT_LAYOUT == "split"
    assert {p: directory("split", p) for p in Place} == {
        Place.WORKER: "workers",
        Place.SERVICE: "services/logs",
        Place.TELEMETRY: "telemetry",
        Place.SERVICE_STATE: "services",
        Place.JOB: "",
    }
    assert {p: directory("flat", p) for p in Place} == {
        Place.WORKER: "",
        Place.SERVICE: "",
        Place.TELEMETRY: "",
        Place.SERVICE_STATE: "services",
        Place.JOB: "",
    }
    assert log_file("split", Place.WORKER, "node1_agg_w0.out") == "workers/node1_agg_w0.out"
    assert log_file("split", Place.JOB, "benchmark.out") == "benchmark.out"
    assert log_file("flat", Place.SERVICE, "service_etcd.out") == "service_etcd.out"


def _logs(p: Plan) -> dict[str, str]:
    return {u.name: u.log for u in p.units}


def test_split_layout_is_the_default_and_puts_each_log_in_its_directory() -> None:
    p = plan(JOB, head=HEAD_TACH)
    assert _logs(p) == {
        "service_etcd": "services/logs/service_etcd.out",
        "service_web.clone": "services/logs/service_web.clone.out",
        "service_web.build": "services/logs/service_web.build.out",
        "agg_0_node1": "workers/node1_agg_w0.out",
        "agg_1_node1": "workers/node1_agg_w1.out",
        "frontend_0": "workers/node1_frontend_0.out",
        "service_dcgm-exporter": "services/logs/service_dcgm-exporter.out",
        "service_node-exporter": "services/logs/service_node-exporter.out",
        "service_tachometer": "telemetry/tachometer.out",
        "service_web": "services/logs/service_web.out",
        "benchmark": "benchmark.out",
    }
    worker = p.unit("agg_0_node1").argv
    assert worker[worker.index("--dump-config-to") + 1] == "/logs/workers/node1_config.json"
    scraper = p.unit("service_tachometer").argv
    assert scraper[1:5] == (
        "--config",
        f"{LOGS}/telemetry/tachometer_config.toml",
        "--local-dir",
        f"{LOGS}/tachometer/local",  # the scraper's data: not a log, at the top in both layouts
    )
    assert f"{LOGS}/telemetry/tachometer_config.toml" in p.files
    assert p.unit("service_web.clone").argv[5] == f"{LOGS}/services/web/src"
    assert p.unit("service_web.build").cwd == "/logs/services/web/src"


def test_flat_layout_keeps_every_log_at_the_top() -> None:
    p = plan(JOB, Cluster(log_layout="flat"), head=HEAD_TACH)
    split = _logs(plan(JOB, head=HEAD_TACH))
    assert _logs(p) == {name: log.rsplit("/", 1)[-1] for name, log in split.items()}
    assert "benchmark.out" in _logs(p).values()
    worker = p.unit("agg_0_node1").argv
    assert worker[worker.index("--dump-config-to") + 1] == "/logs/node1_config.json"
    assert p.unit("service_tachometer").argv[2] == f"{LOGS}/tachometer_config.toml"
    assert f"{LOGS}/tachometer_config.toml" in p.files
    assert p.unit("service_web.clone").argv[5] == f"{LOGS}/services/web/src"  # a service's state: services/


def test_the_setting_from_the_environment_and_a_bad_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from srtd.cluster import load_cluster
    from srtd.errors import ClusterConfigError

    monkeypatch.delenv("SRTD_CLUSTER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no srtslurm.yaml here
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SRTD_LOG_LAYOUT", "flat")
    assert load_cluster(None)[0].log_layout == "flat"
    monkeypatch.setenv("SRTD_LOG_LAYOUT", "nested")
    with pytest.raises(ClusterConfigError) as info:
        load_cluster(None)
    assert str(info.value) == "SRTD_LOG_LAYOUT: input should be 'split' or 'flat', got 'nested'"


def test_the_setting_in_the_cluster_file_and_a_bad_value_with_its_place(tmp_path: Path) -> None:
    from srtd.cluster import load_cluster
    from srtd.errors import ClusterConfigError

    path = tmp_path / "srtslurm.yaml"
    path.write_text("cluster: x\nlog_layout: flat\n")
    assert load_cluster(path)[0].log_layout == "flat"
    path.write_text("cluster: x\nlog_layout: nested\n")
    with pytest.raises(ClusterConfigError) as info:
        load_cluster(path)
    assert str(info.value) == f"{path}:2:13 log_layout: input should be 'split' or 'flat', got 'nested'"
