"""Services: which ones a job runs, where, with what environment and placeholders, in which
order, and every validation rule of the services doc with its message and line.

References: srt-slurm-services.md (the upstream services doc) and srtctl-behaviour.md §4.
"""

from __future__ import annotations

import pytest

from srtd.cluster import Cluster
from srtd.errors import PlanError
from srtd.unit import Condition, FileProbe, LogProbe, TcpProbe, UnitKind
from tests.plan._util import HEAD, PD, after, check_problems, load_problems, names, plan, plan_error

# Tachometer on (the default): the implied exporters are in the plan.
HEAD_TACH = HEAD.replace("observability: {tachometer: {enabled: false}}\n", "")
JOB_ENV = {"SRTD_JOB_ID": "local", "SRTD_LOG_DIR": "/logs"}

DYNAMO_2 = """\
engine: sglang
roles:
  agg: {nodes: 2, workers: 2}
frontend: {type: dynamo, enable_multiple_frontends: false}
"""
ROUTER_2 = """\
engine: sglang
roles:
  agg: {nodes: 2, workers: 2}
frontend: {type: sglang-router, enable_multiple_frontends: false}
"""
# Line 6-9 after HEAD; `services:` written after it starts on line 10.
AGG = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
"""


def services(p: object) -> list[str]:
    return [u.name for u in p.units if u.kind in (UnitKind.SERVICE, UnitKind.BUILD)]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- implied services


def test_dynamo_frontend_implies_etcd_on_the_infra_node_and_nothing_else() -> None:
    p = plan(DYNAMO_2)
    assert services(p) == ["service_etcd"]
    etcd = p.unit("service_etcd")
    assert etcd.implied_by == "frontend.type: dynamo"
    assert (etcd.nodes, etcd.phase, etcd.tier, etcd.critical) == (("node1",), "infra", 2, True)
    assert etcd.ports == {"client": 2379, "peer": 2380}
    assert etcd.readiness is not None
    assert etcd.readiness.probe == TcpProbe(node="node1", port=2379)
    assert etcd.readiness.timeout_seconds == 300
    assert etcd.argv == (
        "/configs/etcd",
        "--data-dir",
        "/tmp/etcd",
        "--listen-client-urls",
        "http://0.0.0.0:2379",
        "--advertise-client-urls",
        "http://node1:2379",
    )
    assert etcd.preamble == "rm -rf /tmp/etcd"
    # etcd itself never gets the discovery env
    assert etcd.env == JOB_ENV
    for unit in ("agg_0_node1", "agg_1_node2", "frontend_0"):
        assert p.unit(unit).env["ETCD_ENDPOINTS"] == "http://node1:2379"
        assert "NATS_SERVER" not in p.unit(unit).env


def test_a_router_frontend_implies_no_discovery_plane() -> None:
    p = plan(ROUTER_2)
    assert services(p) == []
    assert "ETCD_ENDPOINTS" not in p.unit("agg_0_node1").env


def test_services_are_pointed_at_the_infra_etcd_even_when_the_job_runs_none() -> None:
    # srtctl's discovery env: ETCD_ENDPOINTS for every service, whether or not etcd runs
    side = "services:\n  - {name: side, command: [sleep, inf]}\n"
    p = plan(ROUTER_2 + side, addresses={"node1": "10.0.0.1", "node2": "10.0.0.2"})
    assert services(p) == ["service_side"]
    assert p.unit("service_side").env["ETCD_ENDPOINTS"] == "http://10.0.0.1:2379"
    assert "NATS_SERVER" not in p.unit("service_side").env  # only a NATS that runs is advertised
    # a recipe that switches etcd off gets nothing pointing at it
    off = side + "  - {name: etcd, type: etcd, enabled: false}\n"
    p = plan(ROUTER_2 + off)
    assert "ETCD_ENDPOINTS" not in p.unit("service_side").env


@pytest.mark.parametrize("plane", ["request_plane", "event_plane"])
def test_nats_only_with_a_nats_plane(plane: str) -> None:
    p = plan(DYNAMO_2 + f"dynamo: {{{plane}: nats}}\n")
    assert services(p) == ["service_etcd", "service_nats"]
    nats = p.unit("service_nats")
    assert nats.implied_by == "dynamo.request_plane / event_plane: nats"
    assert nats.argv == ("/configs/nats-server", "-js", "-sd", "/tmp/nats")  # 4222 is its default
    assert (nats.nodes, nats.phase, nats.tier) == (("node1",), "infra", 2)
    assert p.unit("agg_1_node2").env["NATS_SERVER"] == "nats://node1:4222"
    assert p.unit("frontend_0").env["NATS_SERVER"] == "nats://node1:4222"


def test_tachometer_exporters_on_every_compute_node() -> None:
    p = plan(DYNAMO_2, head=HEAD_TACH)
    assert services(p) == [
        "service_etcd",
        "service_dcgm-exporter_node1",
        "service_dcgm-exporter_node2",
        "service_node-exporter_node1",
        "service_node-exporter_node2",
        "service_tachometer",
    ]
    dcgm = p.unit("service_dcgm-exporter_node2")
    assert dcgm.implied_by == "the metrics scraper (observability.tachometer)"
    assert (dcgm.phase, dcgm.tier, dcgm.critical, dcgm.readiness) == ("after_frontend", 0, False, None)
    assert dcgm.argv == ("dcgm-exporter", "--collect-interval=1000", "--address", ":9401")
    assert dcgm.container is not None
    assert dcgm.container.image == "nvcr.io#nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"
    # shell-less image: no wrapper, the env travels through srun --export
    assert dcgm.srun.shell is False
    assert dcgm.srun.export_env == {"ETCD_ENDPOINTS": "http://node1:2379"}
    node = p.unit("service_node-exporter_node1")
    assert node.argv[:3] == ("/bin/node_exporter", "--web.listen-address=:9101", "--collector.disable-defaults")
    assert node.argv[-1] == "--collector.vmstat.fields=^(oom_kill|pgpg|pswp|pgsteal|pg.*fault).*"
    assert node.ports == {"metrics": 9101}
    scraper = p.unit("service_tachometer")
    assert scraper.implied_by == "observability.tachometer"
    assert scraper.argv == (
        "tachometer-scraper",
        "--config",
        "outputs/local/logs/telemetry/tachometer_config.toml",
        "--local-dir",
        "outputs/local/logs/tachometer/local",
        "--sync-interval",
        "120",
    )
    assert (scraper.nodes, scraper.container, scraper.srun.shell) == (("node1",), None, False)
    assert scraper.srun.export_env == {"POLARS_MAX_THREADS": "4"}
    assert scraper.terminate_timeout == 120.0  # it compacts its data after SIGTERM
    assert 'url = "http://node2:9101/metrics"' in p.files["outputs/local/logs/telemetry/tachometer_config.toml"]
    assert [w for w in p.warnings if w.startswith("service")] == [
        "service 'process-exporter' is left out: no binary: set `binaries.process-exporter` in the cluster "
        "settings or `options.binary`",
    ]


def test_per_node_exporters_skip_a_node_reserved_for_the_discovery_plane() -> None:
    # srtctl's rule (features/infra-services.yaml's snapshot): etcd and NATS on a dedicated
    # node, the exporters on every other node of the job, and the scraper's targets follow
    body = DYNAMO_2 + (
        "services:\n  - {name: etcd, type: etcd, placement: {node: dedicated}}\n"
        "  - {name: nats, type: nats, placement: {node: dedicated}}\n"
    )
    p = plan(body, head=HEAD_TACH)
    assert p.unit("service_etcd").nodes == ("node1",)
    assert [n for n in services(p) if "exporter" in n] == [
        "service_dcgm-exporter_node2",
        "service_dcgm-exporter_node3",
        "service_node-exporter_node2",
        "service_node-exporter_node3",
    ]
    config = p.files["outputs/local/logs/telemetry/tachometer_config.toml"]
    assert "node1:9101" not in config
    assert 'url = "http://node3:9101/metrics"' in config


def test_process_exporter_runs_host_native_on_every_node_when_its_binary_is_known() -> None:
    body = DYNAMO_2 + "benchmark: {type: sa-bench, isl: 8, osl: 8, concurrencies: [1], placement: {node: dedicated}}\n"
    p = plan(body, Cluster(binaries={"process-exporter": "/opt/bin/process-exporter"}), head=HEAD_TACH)
    units = [u for u in p.units if u.name.startswith("service_process-exporter")]
    # all = head, infra, benchmark client, then the compute nodes, each once
    assert [u.name for u in units] == [
        "service_process-exporter_node1",
        "service_process-exporter_node3",
        "service_process-exporter_node2",
    ]
    first = units[0]
    assert first.container is None
    assert first.argv == (
        "/opt/bin/process-exporter",
        "-config.path",
        "outputs/local/logs/telemetry/process-exporter.yml",
        "-web.listen-address=:9256",
        "-threads=true",
        "-children=false",
        "-recheck=false",
    )
    assert not any("process-exporter" in w for w in p.warnings)
    # the benchmark client is told where it runs, under srtctl's names
    bench = p.unit("benchmark").env
    assert {k: v for k, v in bench.items() if k.startswith("SRT_SERVICE_PROCESS_EXPORTER_")} == {
        "SRT_SERVICE_PROCESS_EXPORTER_NODES": "node1,node3,node2",
        "SRT_SERVICE_PROCESS_EXPORTER_IPS": "node1,node3,node2",
        "SRT_SERVICE_PROCESS_EXPORTER_NODE_COUNT": "3",
    }


def test_a_process_exporter_left_out_is_not_in_the_benchmark_env() -> None:
    # srtctl lists the exporter it skipped for want of a binary; srtd names only what runs
    body = DYNAMO_2 + "benchmark: {type: sa-bench, isl: 8, osl: 8, concurrencies: [1]}\n"
    p = plan(body, head=HEAD_TACH)
    assert not any(k.startswith("SRT_SERVICE_PROCESS_EXPORTER_") for k in p.unit("benchmark").env)
    assert "SRT_SERVICE_NODE_EXPORTER_NODES" in p.unit("benchmark").env


def test_power_telemetry_runs_its_own_gpu_exporter_in_place_of_the_scrapers() -> None:
    p = plan(DYNAMO_2 + "telemetry: {enabled: true}\n", head=HEAD_TACH)
    assert services(p) == [
        "service_etcd",
        "service_dcgm-exporter_node1",
        "service_dcgm-exporter_node2",
        "service_node-exporter_node1",
        "service_node-exporter_node2",
        "service_tachometer",
    ]
    assert p.unit("service_dcgm-exporter_node1").implied_by == "telemetry (GPU power over the benchmark windows)"


def test_tachometer_off_drops_every_exporter() -> None:
    p = plan(DYNAMO_2, Cluster(binaries={"process-exporter": "/x"}))  # HEAD switches tachometer off
    assert services(p) == ["service_etcd"]
    p = plan(DYNAMO_2 + "observability: {tachometer: {default_exporters: false}}\n", head=HEAD_TACH)
    assert services(p) == ["service_etcd", "service_tachometer"]  # the scraper stays, its exporters go


def test_local_mode_drops_the_exporters() -> None:
    p = plan(DYNAMO_2, Cluster(binaries={"process-exporter": "/x"}), head=HEAD_TACH, local=True)
    assert services(p) == ["service_etcd"]
    etcd = p.unit("service_etcd")
    assert etcd.argv[:3] == ("etcd", "--data-dir", "outputs/local/logs/services/etcd/data")
    assert "http://127.0.0.1:2379" in etcd.argv
    assert etcd.container is None


def test_a_declared_entry_replaces_the_implied_one_in_its_position() -> None:
    body = (
        DYNAMO_2
        + """\
services:
  - name: sidecar
    command: [sleep, inf]
  - name: node-exporter
    type: node-exporter
    container: mirror/node-exporter:v1
    options: {port: 9199}
"""
    )
    p = plan(body, head=HEAD_TACH)
    assert services(p) == [
        "service_etcd",
        "service_dcgm-exporter_node1",
        "service_dcgm-exporter_node2",
        "service_node-exporter_node1",
        "service_node-exporter_node2",
        "service_tachometer",
        "service_sidecar",
    ]
    node = p.unit("service_node-exporter_node2")
    assert node.implied_by is None
    assert node.container is not None
    assert node.container.image == "mirror/node-exporter:v1"
    assert node.ports == {"metrics": 9199}
    assert node.argv[1] == "--web.listen-address=:9199"


def test_enabled_false_drops_an_implied_service() -> None:
    body = DYNAMO_2 + "services:\n  - {name: node-exporter, type: node-exporter, enabled: false}\n"
    p = plan(body, head=HEAD_TACH)
    assert services(p) == [
        "service_etcd",
        "service_dcgm-exporter_node1",
        "service_dcgm-exporter_node2",
        "service_tachometer",
    ]
    p = plan(DYNAMO_2 + "services:\n  - {name: etcd, type: etcd, enabled: false}\n")
    assert services(p) == []
    assert "ETCD_ENDPOINTS" not in p.unit("agg_0_node1").env
    assert "ETCD_ENDPOINTS" not in p.unit("frontend_0").env


def test_an_external_etcd_launches_nothing_and_is_injected() -> None:
    body = (
        DYNAMO_2
        + """\
dynamo: {request_plane: nats}
services:
  - {name: etcd, type: etcd, external: "http://etcd.example:2379"}
  - {name: nats, type: nats, external: "nats://bus.example:4222"}
  - {name: side, command: [sleep, inf]}
"""
    )
    p = plan(body)
    assert services(p) == ["service_side"]
    for unit in ("agg_0_node1", "agg_1_node2", "frontend_0", "service_side"):
        env = p.unit(unit).env
        assert env["ETCD_ENDPOINTS"] == "http://etcd.example:2379", unit
        assert env["NATS_SERVER"] == "nats://bus.example:4222", unit
    # nothing of the job waits for an instance it does not run
    assert [e for u in p.units for e in u.after if "etcd" in e.unit or "nats" in e.unit] == []


def test_an_external_mooncake_master_is_injected_into_stores_and_workers() -> None:
    body = (
        PD
        + """\
services:
  - {name: mooncake-master, type: mooncake-master, external: "10.9.9.9:8700"}
  - name: store
    type: mooncake-store
    placement: {node: decode}
"""
    )
    p = plan(body)
    assert services(p) == ["service_etcd", "service_store"]
    store = p.unit("service_store")
    assert store.env["MOONCAKE_MASTER"] == "10.9.9.9:8700"
    assert p.unit("decode_0_node2").env["MOONCAKE_MASTER"] == "10.9.9.9:8700"


# --------------------------------------------------------------------------- environment


def test_service_env_layers_in_order() -> None:
    body = (
        DYNAMO_2
        + """\
dynamo: {event_plane: nats}
environment: {TOP_LEVEL: "not for services"}
services:
  - name: side
    command: [sleep, inf]
    env:
      MINE: "on {node}"
      NATS_SERVER: "nats://mine:1"
"""
    )
    p = plan(body, addresses={"node1": "10.0.0.1", "node2": "10.0.0.2"})
    env = p.unit("service_side").env
    assert list(env.items()) == [
        ("SRTD_JOB_ID", "local"),
        ("SRTD_LOG_DIR", "/logs"),
        ("ETCD_ENDPOINTS", "http://10.0.0.1:2379"),
        ("NATS_SERVER", "nats://mine:1"),  # the recipe wins over discovery
        ("MINE", "on node1"),
    ]
    # inherit_discovery_env: false
    own = "    command: [sleep, inf]\n    inherit_discovery_env: false\n"
    p = plan(body.replace("    command: [sleep, inf]\n", own))
    assert list(p.unit("service_side").env.items()) == [
        ("SRTD_JOB_ID", "local"),
        ("SRTD_LOG_DIR", "/logs"),
        ("MINE", "on node1"),
        ("NATS_SERVER", "nats://mine:1"),
    ]


def test_mooncake_store_env_kind_defaults_recipe_then_forced_values() -> None:
    body = (
        PD
        + """\
services:
  - name: mooncake-master
    type: mooncake-master
    container: mooncake.sqsh
  - name: store
    type: mooncake-store
    placement: {node: decode}
    env:
      MOONCAKE_LOCAL_HOSTNAME: "{node_ip}-ib"
      MOONCAKE_MASTER: "ignored:1"
      SEGMENT: 100gb
"""
    )
    p = plan(body, addresses={"node1": "10.0.0.1", "node2": "10.0.0.2"})
    store = p.unit("service_store")
    assert list(store.env.items()) == [
        ("SRTD_JOB_ID", "local"),
        ("SRTD_LOG_DIR", "/logs"),
        ("ETCD_ENDPOINTS", "http://10.0.0.1:2379"),
        ("MOONCAKE_LOCAL_HOSTNAME", "10.0.0.2-ib"),  # kind default, then the recipe's value
        ("MOONCAKE_MASTER", "10.0.0.1:8700"),  # forced: the recipe's value is ignored
        ("SEGMENT", "100gb"),
        ("MOONCAKE_TE_META_DATA_SERVER", "http://10.0.0.1:8701/metadata"),
    ]
    assert store.argv == ("python", "-m", "mooncake.mooncake_store_service")
    assert store.container is not None
    assert store.container.image == "mooncake.sqsh"
    master = p.unit("service_mooncake-master")
    assert (master.phase, master.tier, master.nodes) == ("before_workers", 1, ("node1",))
    assert master.ports == {"rpc": 8700, "metadata": 8701, "metrics": 8702}
    worker = p.unit("decode_0_node2")
    assert worker.env["MOONCAKE_MASTER"] == "10.0.0.1:8700"
    assert worker.env["MOONCAKE_LOCAL_HOSTNAME"] == "10.0.0.2"


def test_mooncake_stores_wait_for_the_master() -> None:
    body = (
        PD
        + """\
services:
  - {name: mooncake-master, type: mooncake-master}
  - {name: store, type: mooncake-store, placement: {node: decode}}
"""
    )
    p = plan(body)
    assert ("service_mooncake-master", "ready") in after(p, "service_store")


# --------------------------------------------------------------------------- placeholders


PLACEHOLDER_BODY = (
    ROUTER_2
    + """\
services:
  - name: every
    placement: {node: workers}
    command: [run, "{node}", "{node_ip}", "{node_id}", "{index}", "{head_node}", "{head_ip}"]
    args: ["{infra_node}", "{infra_ip}", "{master_port}", "{metadata_port}", "{gpus_per_node}"]
    env:
      POOL: "{pool_node} {pool_ip} {pool_nodes} {pool_ips} {pool_node_count}"
      JSON: '{"host": "{node}", "n": {index}, "x": {unknown}}'
      UNKNOWN: "{nope} {NODE} {{node}}"
    preamble: echo {node_ip} > /tmp/{index}
"""
)


def test_known_placeholders_are_substituted_everywhere() -> None:
    p = plan(PLACEHOLDER_BODY, addresses={"node1": "10.0.0.1", "node2": "10.0.0.2"})
    assert services(p) == ["service_every_node1", "service_every_node2"]
    second = p.unit("service_every_node2")
    assert second.argv == (
        "run",
        "node2",
        "10.0.0.2",
        "1",
        "1",
        "node1",
        "10.0.0.1",
        "node1",
        "10.0.0.1",
        "8700",
        "8701",
        "8",
    )
    assert second.env["POOL"] == "node1 10.0.0.1 node1,node2 10.0.0.1,10.0.0.2 2"
    assert second.preamble == "echo 10.0.0.2 > /tmp/1"


def test_unknown_and_json_braces_are_left_alone() -> None:
    env = plan(PLACEHOLDER_BODY).unit("service_every_node1").env
    assert env["JSON"] == '{"host": "node1", "n": 0, "x": {unknown}}'
    assert env["UNKNOWN"] == "{nope} {NODE} {node1}"


def test_role_placeholder_is_the_placement() -> None:
    body = ROUTER_2 + "services:\n  - {name: r, placement: {node: agg}, command: [echo, '{role}']}\n"
    assert plan(body).unit("service_r_node1").argv == ("echo", "agg")


def test_per_worker_placeholders_and_device_view() -> None:
    body = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 2, gpus: 4}
  decode: {nodes: 1, workers: 1, gpus: 8}
frontend: {type: sglang-router, enable_multiple_frontends: false}
services:
  - name: watch
    placement: {node: workers, per: worker}
    command: [watch, "{worker_role}", "{worker_index}", "{worker_node_rank}", "{worker_gpus}", "{worker_gpu_count}"]
    env: {PORT: "{worker_http_port}", WHERE: "{node}/{index}"}
    readiness: {log: {pattern: watching}}
"""
    p = plan(body)
    assert services(p) == [
        "service_watch_prefill_0_node1",
        "service_watch_prefill_1_node1",
        "service_watch_decode_0_node2",
    ]
    units = [p.unit(n) for n in services(p)]
    assert [u.argv[1:] for u in units] == [
        ("prefill", "0", "0", "0,1,2,3", "4"),
        ("prefill", "1", "0", "4,5,6,7", "4"),
        ("decode", "0", "0", "0,1,2,3,4,5,6,7", "8"),
    ]
    assert [u.env["PORT"] for u in units] == ["6100", "6132", "6100"]
    assert [u.env["WHERE"] for u in units] == ["node1/0", "node1/1", "node2/2"]
    # the device view of a partial worker; a whole-node worker pins nothing
    assert [u.env.get("CUDA_VISIBLE_DEVICES") for u in units] == ["0,1,2,3", "4,5,6,7", None]
    assert [u.gpus for u in units] == [(0, 1, 2, 3), (4, 5, 6, 7), ()]
    assert units[0].readiness is not None
    assert units[0].readiness.probe == LogProbe(pattern="watching")


def test_per_worker_on_a_kind_that_defaults_to_workers_needs_no_node() -> None:
    body = (
        AGG
        + """\
services:
  - {name: mooncake-master, type: mooncake-master}
  - name: store
    type: mooncake-store
    placement: {per: worker}
    readiness: {log: {pattern: up}}
"""
    )
    assert "service_store_agg_0_node1" in names(plan(body))


# --------------------------------------------------------------------------- naming, phases, tiers


def test_unit_names_one_node_several_nodes_per_worker() -> None:
    body = (
        ROUTER_2
        + """\
services:
  - {name: one, command: [x]}
  - {name: many, command: [x], placement: {node: workers}}
  - {name: each, command: [x], placement: {node: agg, per: worker}}
"""
    )
    assert services(plan(body)) == [
        "service_one",
        "service_many_node1",
        "service_many_node2",
        "service_each_agg_0_node1",
        "service_each_agg_1_node2",
    ]
    single = plan(body).unit("service_one")
    assert single.log == "services/logs/service_one.out"
    assert single.nodes == ("node1",)


def test_phases_tiers_and_the_edges_between_them() -> None:
    body = (
        AGG
        + """\
services:
  - {name: late, command: [x]}
  - {name: early, command: [x], start: infra}
  - {name: mid, command: [x], start: before_workers, critical: true}
"""
    )
    p = plan(body)
    assert names(p) == ["service_early", "service_mid", "agg_0_node1", "frontend_0", "service_late"]
    rows = {u.name: (u.phase, u.tier, u.critical) for u in p.units if u.kind is UnitKind.SERVICE}
    assert rows == {
        "service_early": ("infra", 2, False),
        "service_mid": ("before_workers", 1, True),
        "service_late": ("after_frontend", 0, False),
    }
    assert after(p, "service_early") == []
    assert after(p, "service_mid") == [("service_early", "ready")]
    assert after(p, "agg_0_node1") == [("service_mid", "ready")]
    assert after(p, "frontend_0") == [("agg_0_node1", "started")]
    assert after(p, "service_late") == [("frontend_0", "ready")]
    assert p.teardown.tiers == {"0": 30.0, "1": 30.0, "2": 30.0}
    assert p.teardown.total_seconds == 90.0


def test_a_generic_service_without_readiness_is_ready_when_started() -> None:
    p = plan(AGG + "services:\n  - {name: a, command: [x], readiness: {port: 9000}}\n  - {name: b, command: [y]}\n")
    assert p.unit("service_a").readiness is not None
    assert p.unit("service_a").readiness.probe == TcpProbe(node="node1", port=9000)
    assert p.unit("service_a").ports == {"readiness": 9000}
    assert p.unit("service_b").readiness is None
    assert p.unit("service_b").ports == {}


# --------------------------------------------------------------------------- source builds


SOURCE_BODY = (
    DYNAMO_2
    + """\
services:
  - name: router
    source: {git: "https://github.com/ai-dynamo/dynamo", rev: refs/pull/14000/head, path: lib/router}
    build_command: [bash, -lc, "pip install -e ."]
    build_timeout_seconds: 600
    command: [python3, -m, router]
    critical: true
"""
)


def test_source_clone_then_build_then_the_service() -> None:
    p = plan(SOURCE_BODY)
    assert services(p) == ["service_etcd", "service_router.clone", "service_router.build", "service_router"]
    clone, build, svc = p.unit("service_router.clone"), p.unit("service_router.build"), p.unit("service_router")
    assert (clone.kind, build.kind, svc.kind) == (UnitKind.BUILD, UnitKind.BUILD, UnitKind.SERVICE)
    assert clone.container is None  # the bare host clones
    assert clone.argv[-3:] == (
        "https://github.com/ai-dynamo/dynamo",
        "outputs/local/logs/services/router/src",
        "refs/pull/14000/head",
    )
    assert clone.run_timeout == 3 * 600 + 60
    assert after(p, "service_router.build") == [("service_router.clone", "succeeded")]
    assert build.run_timeout == 600
    assert build.cwd == "/logs/services/router/src/lib/router"
    assert build.argv == ("bash", "-lc", "pip install -e .")
    assert build.container is not None
    assert build.container.image == "img.sqsh"
    assert after(p, "service_router")[0] == ("service_router.build", "succeeded")
    assert ("frontend_0", "ready") in after(p, "service_router")
    assert svc.preamble == "cd /logs/services/router/src/lib/router"
    assert (svc.critical, svc.nodes) == (True, ("node1",))
    # one-shot builds are not barriers: the clone starts at once
    assert after(p, "service_router.clone") == []


def test_source_without_build_command_warns_and_runs_from_the_clone() -> None:
    body = SOURCE_BODY.replace('    build_command: [bash, -lc, "pip install -e ."]\n', "")
    p = plan(body)
    assert services(p) == ["service_etcd", "service_router.clone", "service_router"]
    assert after(p, "service_router")[0] == ("service_router.clone", "succeeded")
    assert "service 'router' has a source but no build_command; it runs from the clone as is" in p.warnings


def test_a_pinned_sha_is_what_gets_checked_out() -> None:
    body = SOURCE_BODY.replace("rev: refs/pull/14000/head,", "rev: refs/pull/14000/head, sha: 0123abcd,")
    assert plan(body).unit("service_router.clone").argv[-1] == "0123abcd"


# --------------------------------------------------------------------------- terminal, hold


def test_terminal_services_end_the_job_and_a_manual_job_holds() -> None:
    assert plan(AGG).hold is True  # manual benchmark, nothing terminal: run until signalled
    p = plan(AGG + "services:\n  - {name: run, command: [x], terminal: true}\n")
    assert p.hold is False
    assert [u.name for u in p.terminal_units()] == ["service_run"]
    bench = plan(AGG + "benchmark: {type: custom, command: 'true'}\n")
    assert bench.hold is False
    assert [u.name for u in bench.terminal_units()] == ["benchmark"]


def test_terminal_with_a_benchmark_is_refused() -> None:
    body = AGG + "benchmark: {type: custom, command: 'true'}\n"
    body += "services:\n  - {name: run, command: [x], terminal: true}\n"
    assert load_problems(body) == [
        (
            10,
            "benchmark.type",
            "terminal services (run) are the job's run; benchmark.type must stay `manual`, not 'custom'",
        )
    ]


# --------------------------------------------------------------------------- explicit edges


def test_explicit_after_edges_between_services() -> None:
    body = (
        ROUTER_2
        + """\
services:
  - {name: a, command: [x], placement: {node: workers}}
  - {name: b, command: [y], after: [a]}
"""
    )
    p = plan(body)
    assert after(p, "service_b") == [
        ("service_a_node1", "ready"),
        ("service_a_node2", "ready"),
        ("frontend_0", "ready"),
    ]
    assert after(p, "service_a_node1") == [("frontend_0", "ready")]


def test_after_an_unknown_service_is_a_plan_error() -> None:
    body = AGG + "services:\n  - {name: a, command: [x]}\n  - {name: b, command: [y], after: [a, zzz]}\n"
    assert plan_error(body) == "service 'b' waits for 'zzz', which is not a service of this job (a, b)"


def test_a_cycle_of_after_edges_is_a_plan_error_naming_it() -> None:
    body = AGG + "services:\n  - {name: a, command: [x], after: [b]}\n  - {name: b, command: [y], after: [a]}\n"
    assert plan_error(body) == "dependency cycle: service_a -> service_b -> service_a"


def test_waiting_for_oneself_is_refused_at_load() -> None:
    body = AGG + "services:\n  - {name: a, command: [x], after: [a]}\n"
    assert load_problems(body) == [(11, "services.0.after", "service 'a' cannot wait for itself")]


def test_an_after_edge_that_runs_backwards_through_the_phases_is_a_cycle() -> None:
    # `early` is infra; waiting for an after_frontend service closes a loop through the workers.
    body = (
        AGG
        + "services:\n  - {name: late, command: [x]}\n"
        + "  - {name: early, command: [y], start: infra, after: [late]}\n"
    )
    message = plan_error(body)
    assert message.startswith("dependency cycle: ")
    assert "service_early" in message
    assert "service_late" in message


# --------------------------------------------------------------------------- ports


def test_two_services_on_one_port_on_one_node_are_refused() -> None:
    body = (
        AGG
        + """\
services:
  - {name: a, command: [x], readiness: {port: 9000}}
  - {name: b, command: [y], readiness: {http: {port: 9000, path: /ready}}}
"""
    )
    assert plan_error(body) == "port 9000 on node1: both service_a and service_b listen on it"


def test_a_service_on_a_worker_port_is_refused() -> None:
    body = AGG + "services:\n  - {name: a, command: [x], readiness: {port: 6100}}\n"
    assert plan_error(body) == "port 6100 on node1: both agg_0_node1 and service_a listen on it"


def test_same_port_on_different_nodes_is_fine() -> None:
    body = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
services:
  - {name: p, command: [x], placement: {node: prefill}, readiness: {port: 8800}}
  - {name: d, command: [x], placement: {node: decode}, readiness: {port: 8800}}
"""
    p = plan(body)
    assert [(p.unit(n).nodes, p.unit(n).ports) for n in ("service_p", "service_d")] == [
        (("node1",), {"readiness": 8800}),
        (("node2",), {"readiness": 8800}),
    ]


# --------------------------------------------------------------------------- validation


# (body after AGG, how it is refused, problems).  `services:` is on line 10.
VALIDATION: dict[str, tuple[str, str, list[tuple[int, str, str]]]] = {
    "empty name": (
        'services:\n  - name: " "\n    command: [a]\n',
        "load",
        [(11, "services.0.name", "must not be empty")],
    ),
    "duplicate name": (
        "services:\n  - name: a\n    command: [x]\n  - name: a\n    command: [y]\n",
        "load",
        [(13, "services.1.name", "duplicate service name 'a' (also services.0)")],
    ),
    "unknown type": (
        "services:\n  - name: a\n    type: redis\n",
        "check",
        [
            (
                12,
                "services.0.type",
                "unknown service type 'redis'; known: dcgm-exporter, etcd, generic, gms, lmcache-server, "
                "mooncake-donor, mooncake-master, mooncake-store, nats, node-exporter, process-exporter, ray, "
                "tachometer",
            )
        ],
    ),
    "generic without command": (
        'services:\n  - name: a\n    env: {X: "1"}\n',
        "check",
        [(11, "services.0.command", "a generic service needs a `command`")],
    ),
    "blank command entry": (
        'services:\n  - name: a\n    command: [x, " "]\n',
        "load",
        [(12, "services.0.command.1", "must not be blank")],
    ),
    "blank args entry": (
        'services:\n  - name: a\n    command: [x]\n    args: [""]\n',
        "load",
        [(13, "services.0.args.0", "must not be blank")],
    ),
    "empty command": (
        "services:\n  - name: a\n    command: []\n",
        "load",
        [(12, "services.0.command", "must not be empty; leave it out to use the kind's command")],
    ),
    "empty build_command": (
        "services:\n  - name: a\n    command: [x]\n    build_command: []\n",
        "load",
        [(13, "services.0.build_command", "must not be empty")],
    ),
    "placement outside its vocabulary": (
        "services:\n  - name: a\n    command: [x]\n    placement: {node: gpu}\n",
        "load",
        [
            (
                13,
                "services.0.placement.node",
                "must be 'head', 'infra', 'dedicated', 'prefill', 'decode', 'agg', 'workers', 'compute' or 'all', "
                "got 'gpu'",
            )
        ],
    ),
    "start outside its vocabulary": (
        "services:\n  - name: a\n    command: [x]\n    start: early\n",
        "load",
        [
            (
                13,
                "services.0.start",
                "must be 'infra', 'before_workers', 'with_workers' or 'after_frontend', got 'early'",
            )
        ],
    ),
    "per outside its vocabulary": (
        "services:\n  - name: a\n    command: [x]\n    placement: {node: agg, per: gpu}\n",
        "load",
        [(13, "services.0.placement.per", "must be 'node' or 'worker', got 'gpu'")],
    ),
    "dedicated on a generic service": (
        "services:\n  - name: a\n    command: [x]\n    placement: {node: dedicated}\n",
        "check",
        [(13, "services.0.placement.node", "generic cannot take a dedicated node")],
    ),
    "dedicated on a store": (
        "services:\n  - {name: m, type: mooncake-master}\n  - {name: s, type: mooncake-store, "
        "placement: {node: dedicated}}\n",
        "check",
        [(12, "services.1.placement.node", "mooncake-store cannot take a dedicated node")],
    ),
    "external on a generic service": (
        "services:\n  - name: a\n    command: [x]\n    external: http://somewhere:1\n",
        "check",
        [(13, "services.0.external", "generic cannot be external; only etcd, nats, mooncake-master")],
    ),
    "etcd placed on the workers": (
        "services:\n  - name: etcd\n    type: etcd\n    placement: {node: workers}\n",
        "check",
        [(13, "services.0.placement.node", "etcd runs on dedicated, head, infra, not 'workers'")],
    ),
    "unknown option key": (
        "services:\n  - name: nats\n    type: nats\n    options: {max_payload: 8}\n",
        "check",
        [(13, "services.0.options.max_payload", "unknown option for nats (known: max_payload_mb)")],
    ),
    "option on a kind without options": (
        "services:\n  - name: a\n    command: [x]\n    options: {port: 1}\n",
        "check",
        [(13, "services.0.options.port", "unknown option for generic (known: none)")],
    ),
    "nats payload not positive": (
        "services:\n  - name: nats\n    type: nats\n    options: {max_payload_mb: 0}\n",
        "check",
        [(13, "services.0.options.max_payload_mb", "must be a positive integer, got 0")],
    ),
    "moving rev": (
        'services:\n  - name: a\n    command: [x]\n    source: {git: "https://e.com/r", rev: main}\n',
        "load",
        [
            (
                13,
                "services.0.source.rev",
                "'main' is a branch and moves; use a commit SHA, a tag or refs/pull/<n>/head",
            )
        ],
    ),
    "branch ref": (
        'services:\n  - name: a\n    command: [x]\n    source: {git: "https://e.com/r", rev: refs/heads/dev}\n',
        "load",
        [
            (
                13,
                "services.0.source.rev",
                "'refs/heads/dev' is a branch and moves; use a commit SHA, a tag or refs/pull/<n>/head",
            )
        ],
    ),
    "source on several nodes": (
        "services:\n  - name: a\n    command: [x]\n    placement: {node: workers}\n"
        '    source: {git: "https://e.com/r", rev: v1.0}\n',
        "load",
        [(14, "services.0.source", "a source build needs a single-node placement (head, infra or dedicated)")],
    ),
    "source on an owner": (
        'services:\n  - name: a\n    command: [x]\n    nodes: 2\n    source: {git: "https://e.com/r", rev: v1.0}\n',
        "load",
        [(14, "services.0.source", "a source build needs a single-node placement (head, infra or dedicated)")],
    ),
    "store without a master": (
        "services:\n  - name: store\n    type: mooncake-store\n",
        "check",
        [(12, "services.0.type", "mooncake-store needs a mooncake-master entry")],
    ),
    "two masters": (
        "services:\n  - name: m1\n    type: mooncake-master\n  - name: m2\n    type: mooncake-master\n",
        "check",
        [(13, "services.1", "only one mooncake-master per job")],
    ),
    "etcd and nats disagree on dedicated": (
        "services:\n  - name: etcd\n    type: etcd\n    placement: {node: dedicated}\n  - name: nats\n    type: nats\n",
        "check",
        [
            (
                10,
                "services",
                "etcd and nats share the infra node: both dedicated or neither (etcd=dedicated, nats=not dedicated)",
            )
        ],
    ),
    "per worker on the head": (
        "services:\n  - name: a\n    command: [x]\n    placement: {node: head, per: worker}\n",
        "load",
        [
            (
                13,
                "services.0.placement.per",
                "`per: worker` needs placement.node prefill, decode, agg or workers, not 'head'",
            )
        ],
    ),
    "per worker with a port probe": (
        "services:\n  - name: a\n    command: [x]\n    placement: {node: agg, per: worker}\n"
        "    readiness: {port: 9000}\n",
        "load",
        [
            (
                14,
                "services.0.readiness",
                "per-worker instances share their node's ports; only a `log` probe can tell them apart",
            )
        ],
    ),
    "per worker on a pool": (
        "services:\n  - name: train\n    command: [x]\n    nodes: 1\n  - name: a\n    command: [x]\n"
        "    placement: {node: workers, pool: train, per: worker}\n",
        "load",
        [
            (16, "services.1.placement.pool", "replaces placement.node; give one of them"),
            (16, "services.1.placement.per", "`per: worker` cannot ride on a pool"),
        ],
    ),
    "per worker on an owner": (
        "services:\n  - name: a\n    command: [x]\n    nodes: 1\n    placement: {node: workers, per: worker}\n",
        "load",
        [(14, "services.0.placement.per", "`per: worker` cannot own nodes")],
    ),
    "pool and node": (
        "services:\n  - name: train\n    command: [x]\n    nodes: 1\n  - name: a\n    command: [x]\n"
        "    placement: {node: head, pool: train}\n",
        "load",
        [(16, "services.1.placement.pool", "replaces placement.node; give one of them")],
    ),
    "pool and nodes": (
        "services:\n  - name: train\n    command: [x]\n    nodes: 1\n  - name: a\n    command: [x]\n"
        "    nodes: 1\n    placement: {pool: train}\n",
        "load",
        [(17, "services.1.placement.pool", "a service that owns nodes runs on its own pool")],
    ),
    "pool that nobody owns": (
        "services:\n  - name: a\n    command: [x]\n    placement: {pool: train}\n",
        "load",
        [(13, "services.0.placement.pool", "'train' is not a pool (services that own nodes: none)")],
    ),
    "owner placed on the head": (
        "services:\n  - name: a\n    command: [x]\n    nodes: 1\n    placement: {node: head}\n",
        "load",
        [(14, "services.0.placement.node", "a service that owns nodes is placed on its own pool (`workers`)")],
    ),
    "owner of no nodes": (
        "services:\n  - name: a\n    command: [x]\n    nodes: 0\n",
        "load",
        [(13, "services.0.nodes", "must be at least 1, got 0")],
    ),
    "pools with het jobs": (
        "resources: {gpus_per_node: 8, het_jobs: true}\nservices:\n  - name: a\n    command: [x]\n    nodes: 1\n",
        "load-replace-resources",
        [(14, "services.0.nodes", "pools are not supported with resources.het_jobs")],
    ),
    "no cpus": (
        "services:\n  - name: a\n    command: [x]\n    cpus_per_task: 0\n",
        "load",
        [(13, "services.0.cpus_per_task", "must be at least 1, got 0")],
    ),
    "no build time": (
        "services:\n  - name: a\n    command: [x]\n    build_timeout_seconds: 0\n",
        "load",
        [(13, "services.0.build_timeout_seconds", "must be positive, got 0")],
    ),
    "empty external": (
        'services:\n  - name: etcd\n    type: etcd\n    external: " "\n',
        "load",
        [(13, "services.0.external", "must not be empty")],
    ),
    "terminal and external": (
        "services:\n  - name: etcd\n    type: etcd\n    external: http://e:2379\n    terminal: true\n",
        "load",
        [(14, "services.0.terminal", "an external service launches nothing, so it cannot be terminal")],
    ),
    "several metrics without names": (
        "services:\n  - name: a\n    command: [x]\n    metrics:\n      - {port: 1}\n      - {port: 2}\n",
        "load",
        [(13, "services.0.metrics", "several endpoints need distinct `name`s")],
    ),
    "two probes": (
        "services:\n  - name: a\n    command: [x]\n    readiness: {port: 9000, log: {pattern: up}}\n",
        "load",
        [(13, "services.0.readiness", "name exactly one probe (port / tcp / http / log / file); found port, log")],
    ),
    "no probe": (
        "services:\n  - name: a\n    command: [x]\n    readiness: {timeout_seconds: 5}\n",
        "load",
        [(13, "services.0.readiness", "name exactly one probe (port / tcp / http / log / file); found none")],
    ),
    "probe port out of range": (
        "services:\n  - name: a\n    command: [x]\n    readiness: {tcp: {port: 70000}}\n",
        "load",
        [(13, "services.0.readiness.tcp.port", "port must be between 1 and 65535, got 70000")],
    ),
    "http path and status": (
        "services:\n  - name: a\n    command: [x]\n    readiness: {http: {port: 80, path: health, status: 99}}\n",
        "load",
        [
            (13, "services.0.readiness.http.path", "must start with '/', got 'health'"),
            (13, "services.0.readiness.http.status", "must be an HTTP status (100-599), got 99"),
        ],
    ),
    "log pattern that does not compile, no interval": (
        'services:\n  - name: a\n    command: [x]\n    readiness: {log: {pattern: "(x"}, interval_seconds: 0}\n',
        "load",
        [
            (
                13,
                "services.0.readiness.log.pattern",
                "is not a log pattern srtd can use (RE2 syntax: no backreferences, no lookaround): missing ): (x",
            ),
            (13, "services.0.readiness.interval_seconds", "must be positive, got 0"),
        ],
    ),
    "unknown field": (
        "services:\n  - name: a\n    command: [x]\n    comand: [y]\n",
        "load",
        [(13, "services.0.comand", "unknown field 'comand'; did you mean 'command'?")],
    ),
}


@pytest.mark.parametrize("case", sorted(VALIDATION))
def test_validation_rule(case: str) -> None:
    body, how, expected = VALIDATION[case]
    if how == "load-replace-resources":
        head = HEAD.replace("resources: {gpus_per_node: 8}\n", "")
        assert load_problems(AGG + body, head=head) == [(line - 1, p, m) for line, p, m in expected]
    elif how == "load":
        assert load_problems(AGG + body) == expected
    else:
        assert check_problems(AGG + body) == expected


def test_check_problems_stop_the_plan() -> None:
    from srtd.errors import RecipeError

    with pytest.raises(RecipeError) as info:
        plan(AGG + "services:\n  - name: a\n    type: redis\n")
    assert [p.path for p in info.value.problems] == ["services.0.type"]


def test_validation_cases_cover_the_services_doc() -> None:
    """Each rule of the services doc's Validation section has a case above."""
    doc_rules = {
        "Empty or duplicate name": ["empty name", "duplicate name"],
        "unknown type": ["unknown type"],
        "generic without command": ["generic without command"],
        "a command/args entry that is blank": ["blank command entry", "blank args entry"],
        "build_command: []": ["empty build_command"],
        "placement.node or start outside their vocabularies": [
            "placement outside its vocabulary",
            "start outside its vocabulary",
        ],
        "dedicated or external on a kind that does not support them": [
            "dedicated on a generic service",
            "external on a generic service",
        ],
        "an options key the kind does not know": ["unknown option key"],
        "source with a moving rev, or with a multi-node placement": ["moving rev", "source on several nodes"],
        "type: mooncake-store without a mooncake-master entry; two mooncake-master entries": [
            "store without a master",
            "two masters",
        ],
        "etcd and nats disagreeing on dedicated": ["etcd and nats disagree on dedicated"],
    }
    for rule, cases in doc_rules.items():
        for case in cases:
            assert case in VALIDATION, (rule, case)


def test_a_condition_enum_covers_what_plans_use() -> None:
    assert {c.value for c in Condition} == {"started", "ready", "succeeded", "ended"}


def test_exporters_also_run_on_pool_nodes() -> None:
    body = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
services:
  - {name: train, nodes: 2, command: [x]}
"""
    p = plan(body, head=HEAD_TACH)
    assert [u.name for u in p.units if u.name.startswith("service_node-exporter")] == [
        "service_node-exporter_node1",
        "service_node-exporter_node2",
        "service_node-exporter_node3",
    ]
    assert p.nodes["pool:train"] == ("node2", "node3")


# --------------------------------------------------------------------------- field paths of plan errors


def plan_problems(body: str) -> list[tuple[str, str | None, int | None]]:
    """(path, file, line) of each plan-time refusal: a field path, and no position (no file I/O here)."""
    with pytest.raises(PlanError) as info:
        plan(body)
    return [(p.path, p.file, p.line) for p in info.value.problems]


def test_plan_errors_carry_the_field_path_of_the_recipe_key() -> None:
    after = AGG + "services:\n  - {name: a, command: [x], after: [b, zz]}\n  - {name: b, command: [x], after: [a]}\n"
    assert plan_problems(after) == [("services.0.after.1", None, None)]
    cycle = AGG + "services:\n  - {name: a, command: [x], after: [b]}\n  - {name: b, command: [x], after: [a]}\n"
    assert plan_problems(cycle) == [("services.0.after.0", None, None)]
    port = AGG + "services:\n  - {name: a, command: [x], options: {}, readiness: {port: 6100}}\n"
    assert plan_problems(port) == [("services.0.readiness.port", None, None)]


def test_an_after_entry_naming_a_service_left_out_says_so() -> None:
    # the process exporter is implied by the metrics scraper and left out without its binary
    head = HEAD.replace("observability: {tachometer: {enabled: false}}\n", "")
    body = AGG + "services:\n  - {name: a, command: [x], after: [process-exporter]}\n"
    with pytest.raises(PlanError) as info:
        plan(body, head=head)
    assert str(info.value) == (
        "service 'a' waits for 'process-exporter', which is left out of this plan (see the warnings)"
    )
    assert info.value.problems[0].path == "services.0.after.0"


# --------------------------------------------------------------------------- newer upstream fields


def test_with_workers_starts_beside_the_workers_and_is_stopped_after_them() -> None:
    body = DYNAMO_2 + (
        "services:\n"
        "  - name: store\n"
        "    command: [store-server]\n"
        "    start: with_workers\n"
        "    placement: {node: workers}\n"
        "    readiness: {file: {path: 'store/{node}.ready'}, timeout_seconds: 900}\n"
    )
    p = plan(body)
    store = p.unit("service_store_node2")
    assert (store.phase, store.tier) == ("workers", 1)
    # it waits for what the workers wait for, and the frontend only for it to start
    assert after(p, "service_store_node2") == after(p, "agg_0_node1")
    assert ("service_store_node2", Condition.STARTED) in after(p, "frontend_0")
    assert store.readiness is not None
    assert store.readiness.probe == FileProbe(node="node2", path="outputs/local/logs/store/node2.ready")
    assert store.readiness.timeout_seconds == 900


def test_a_donor_needs_trtllms_pool_master() -> None:
    body = AGG + "services:\n  - {name: donor, type: mooncake-donor, options: {size: 4GiB}}\n"
    assert check_problems(body) == [
        (
            11,
            "services.0.type",
            "mooncake-donor needs a mooncake-master with TRT-LLM pool options "
            "(eviction_ratio, master_timeout_s, store_role)",
        )
    ]
