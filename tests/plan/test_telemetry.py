"""Power telemetry's GPU exporter: the exporter kinds (registry rows), the unit the recipe's
exporter becomes, what the benchmark client and the scraper are told, and the refused values."""

from __future__ import annotations

import json

import pytest

from srtd.cluster import Cluster
from srtd.unit import HttpProbe
from tests.plan._util import HEAD, check_problems, load_problems, plan

HEAD_TACH = HEAD.replace("observability: {tachometer: {enabled: false}}\n", "")
AGG = """\
engine: sglang
roles:
  agg: {nodes: 2, workers: 2}
frontend: {type: sglang-router, enable_multiple_frontends: false}
benchmark: {type: sa-bench, isl: 8, osl: 8, concurrencies: [1]}
"""
# With the scraper on the head is 4 lines: `telemetry:` is line 10, a key under `dcgm_exporter` line 15.
AMD = """\
telemetry:
  enabled: true
  dcgm_exporter:
    container_image: docker://rocm/device-metrics-exporter:v1.5.2
    command: /home/amd/tools/entrypoint.sh --port 5000
    port: 5000
    kind: custom
    gpu_labels: {index: gpu_id, identity: serial_number}
    gpu_metrics:
      power: {metric: gpu_power_usage, scope: amd_device_metrics_exporter_gpu_power_usage}
      temperature: {metric: gpu_junction_temperature}
"""


def test_a_custom_exporter_runs_as_written_on_every_node() -> None:
    p = plan(AGG + AMD, head=HEAD_TACH)
    for node in ("node1", "node2"):
        unit = p.unit(f"service_dcgm-exporter_{node}")
        assert unit.argv == ("/home/amd/tools/entrypoint.sh", "--port", "5000")
        assert unit.container is not None
        assert unit.container.image == "docker://rocm/device-metrics-exporter:v1.5.2"
        assert unit.ports == {"metrics": 5000}


def test_exporters_json_names_the_endpoints_and_the_recipes_labels_over_nothing() -> None:
    p = plan(AGG + AMD, head=HEAD_TACH)
    doc = json.loads(p.files["outputs/local/logs/power/exporters.json"])
    assert doc == {
        "kind": "custom",
        "gpu_labels": {"index": "gpu_id", "identity": "serial_number"},
        "gpu_metrics": {
            "power": {"metric": "gpu_power_usage", "scope": "amd_device_metrics_exporter_gpu_power_usage"},
            "temperature": {"metric": "gpu_junction_temperature", "scope": None},
        },
        "endpoints": [
            {"node": "node1", "url": "http://node1:5000/metrics"},
            {"node": "node2", "url": "http://node2:5000/metrics"},
        ],
        "windows": "/logs/power/windows",
    }


def test_the_dcgm_kind_brings_dcgms_names_and_the_recipe_overrides_one() -> None:
    body = AGG + (
        "telemetry:\n  enabled: true\n  dcgm_exporter:\n    container_image: nvcr.io/dcgm:1\n    port: 9500\n"
        "    gpu_metrics: {power: {metric: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION}}\n"
    )
    p = plan(body, head=HEAD_TACH)
    doc = json.loads(p.files["outputs/local/logs/power/exporters.json"])
    assert (doc["kind"], doc["gpu_labels"]) == ("dcgm", {"index": "gpu", "identity": "UUID"})
    assert doc["gpu_metrics"]["power"] == {"metric": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "scope": None}
    assert doc["gpu_metrics"]["gpu_util"] == {"metric": "DCGM_FI_DEV_GPU_UTIL", "scope": None}
    unit = p.unit("service_dcgm-exporter_node1")
    assert unit.argv == ("dcgm-exporter", "--collect-interval=1000", "--address", ":9500")


def test_the_client_marks_windows_and_the_scraper_reads_the_exporters_own_port() -> None:
    p = plan(AGG + AMD, head=HEAD_TACH)
    assert p.unit("benchmark").env["SRT_MEASUREMENT_WINDOW_DIR"] == "/logs/power/windows"
    scrape = p.files["outputs/local/logs/telemetry/tachometer_config.toml"]
    assert 'url = "http://node1:5000/metrics"' in scrape
    assert ":9401/" not in scrape


def test_no_gpu_exporter_no_windows() -> None:
    p = plan(AGG, Cluster())  # HEAD switches the scraper and its exporters off
    assert "SRT_MEASUREMENT_WINDOW_DIR" not in p.unit("benchmark").env


def test_the_plan_says_what_srtd_samples_from_every_exporter() -> None:
    p = plan(AGG + AMD.replace("  enabled: true\n", "  enabled: true\n  required: true\n  collect_interval_ms: 500\n"))
    assert p.power is not None
    assert p.power.as_json() == {
        "dir": "outputs/local/logs/power",
        "endpoints": [
            {"node": "node1", "url": "http://node1:5000/metrics"},
            {"node": "node2", "url": "http://node2:5000/metrics"},
        ],
        "metric": "amd_device_metrics_exporter_gpu_power_usage",  # the scope: how the exporter writes it
        "index_label": "gpu_id",
        "identity_label": "serial_number",
        "interval_seconds": 0.5,
        "request_timeout_seconds": 2.0,
        "required": True,
    }
    dcgm = plan(AGG + "telemetry: {enabled: true}\n").power
    assert dcgm is not None
    assert (dcgm.metric, dcgm.index_label, dcgm.identity_label) == ("DCGM_FI_DEV_POWER_USAGE", "gpu", "UUID")


def test_no_telemetry_no_power_key_in_the_plan() -> None:
    p = plan(AGG, head=HEAD_TACH)  # the scraper's exporters alone: srtd samples nothing
    assert p.power is None
    assert '"power"' not in p.dumps()
    assert plan(AGG + AMD, local=True).power is None  # local runs have no GPU exporter


@pytest.mark.parametrize(
    ("exporter", "problems"),
    [
        (
            "kind: amd",
            [(15, "telemetry.dcgm_exporter.kind", "unknown telemetry exporter kind 'amd'; known: custom, dcgm")],
        ),
        (
            "kind: custom",
            [
                (12, "telemetry.dcgm_exporter.command", "is required for kind 'custom' (srtd knows no default for it)"),
                (12, "telemetry.dcgm_exporter.gpu_labels", "is required for kind 'custom' (at least `index`)"),
                (12, "telemetry.dcgm_exporter.gpu_metrics", "needs a `power` metric for kind 'custom'"),
            ],
        ),
        (
            "binary: /usr/bin/dcgm-exporter",
            [
                (
                    15,
                    "telemetry.dcgm_exporter.binary",
                    "a host exporter binary is not run by srtd yet; name `container_image`",
                )
            ],
        ),
    ],
)
def test_what_the_exporter_kinds_refuse(exporter: str, problems: list[tuple[int, str, str]]) -> None:
    body = AGG + f"telemetry:\n  enabled: true\n  dcgm_exporter:\n    container_image: x\n    port: 1\n    {exporter}\n"
    found = check_problems(body, head=HEAD_TACH)
    assert found == problems


def test_a_gpu_metric_without_its_name_is_one_line_with_its_location() -> None:
    body = AGG + "telemetry:\n  dcgm_exporter:\n    container_image: x\n    port: 1\n    gpu_metrics: {power: {}}\n"
    [(line, path, message)] = load_problems(body)
    assert (line, path, message) == (
        15,
        "telemetry.dcgm_exporter.gpu_metrics.power.metric",
        "required field is missing",
    )


def test_under_required_power_the_benchmark_waits_for_every_exporter_to_answer() -> None:
    """The exporter is ready once its /metrics (what srtd samples) answers, within startup_timeout_seconds."""
    required = AMD.replace("  enabled: true\n", "  enabled: true\n  required: true\n  startup_timeout_seconds: 45\n")
    p = plan(AGG + required, head=HEAD_TACH)
    for node in ("node1", "node2"):
        readiness = p.unit(f"service_dcgm-exporter_{node}").readiness
        assert readiness is not None
        assert readiness.probe == HttpProbe(node=node, port=5000, path="/metrics")
        assert (readiness.timeout_seconds, readiness.interval_seconds) == (45.0, 1)
    assert {e.unit for e in p.unit("benchmark").after} >= {"service_dcgm-exporter_node1", "service_dcgm-exporter_node2"}
    # without `required` a late exporter costs at most a window's coverage: it is ready at once, as before
    assert plan(AGG + AMD, head=HEAD_TACH).unit("service_dcgm-exporter_node1").readiness is None
