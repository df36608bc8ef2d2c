"""The launch rules that make srtd start what srtctl starts, one rule per test.

`tests/fidelity/` compares whole plans with srtctl's snapshots; these pin each rule on
recipes of their own, so a snapshot that is not in that folder comes out the same way.
"""

from __future__ import annotations

import json
import shlex

from srtd.unit import UnitKind
from tests.plan._util import load_problems, plan

SA_BENCH = "benchmark: {type: sa-bench, isl: 256, osl: 64, concurrencies: [2, 4]}\n"


def test_sa_bench_gets_its_19_positional_arguments() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  prefill: {nodes: 1, workers: 2, gpus: 2}\n"
        "  decode: {nodes: 1, workers: 1, gpus: 4}\n"
        "frontend: {type: dynamo, enable_multiple_frontends: false}\n" + SA_BENCH
    )
    bench = plan(body).unit("benchmark")
    assert bench.argv == (
        "bash",
        "/srtctl-benchmarks/sa-bench/bench.sh",
        "http://localhost:8000",
        "256",
        "64",
        "2x4",
        "inf",
        "/model",
        "m",
        "true",
        "8",  # 2 x 2 prefill GPUs + 4 decode GPUs
        "4",
        "4",
        "0.8",
        "10",
        "2",
        "",
        "true",
        "random",
        "",
        "false",
    )
    # the positional contract replaces the SRT_BENCH_* variables
    assert not any(k.startswith("SRT_BENCH_") for k in bench.env)


def test_the_benchmark_environment_names_frontend_workers_and_services() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  agg: {nodes: 2, workers: 2}\n"
        "frontend: {type: dynamo, enable_multiple_frontends: false}\n" + SA_BENCH
    )
    env = plan(body).unit("benchmark").env
    assert {k: v for k, v in env.items() if not k.startswith("SRTD_")} == {
        "SRTCTL_FRONTEND_TYPE": "dynamo",
        "SRT_FRONTEND_HOST": "node1",
        "SRT_FRONTEND_PORT": "8000",
        "SRT_GPUS_PER_NODE": "8",
        "SRT_WORKER_NODES": "node1,node2",
        "SRT_AGG_IPS": "node1,node2",
        "SRT_AGG_ENDPOINTS": "node1:7500,node2:7501",  # Dynamo's system ports serve /metrics
        "AIPERF_SERVER_METRICS_URLS": "http://node1:7500/metrics,http://node2:7501/metrics",
        "SRT_SERVICE_ETCD_NODES": "node1",
        "SRT_SERVICE_ETCD_IPS": "node1",
        "SRT_SERVICE_ETCD_NODE_COUNT": "1",
    }


def test_sglang_sidecar_runs_engine_and_sidecar_under_one_step() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  prefill: {nodes: 2, workers: 1, sidecar: true, kv_events: true, args: {data-parallel-size: 2}}\n"
        "  decode: {nodes: 2, workers: 1, sidecar: true}\n"
        "frontend: {type: dynamo, enable_multiple_frontends: false}\n"
    )
    p = plan(body)
    leader = p.unit("prefill_0_node1")
    assert leader.argv[:2] == ("bash", "-c")
    script = leader.argv[2]
    engine, sidecar = (line[:-2] for line in script.splitlines() if line.endswith(" &"))
    engine_argv = shlex.split(engine)
    assert engine_argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert "--enable-metrics" not in engine_argv
    grpc = engine_argv[engine_argv.index("--grpc-port") + 1]
    events = json.loads(engine_argv[engine_argv.index("--kv-events-config") + 1])
    assert events == {"publisher": "zmq", "topic": "kv-events", "endpoint": "tcp://*:5200"}
    assert shlex.split(sidecar) == [
        "python3",
        "-m",
        "dynamo.sglang.sidecar",
        "--grpc-endpoint",
        f"127.0.0.1:{grpc}",
        "--bootstrap-host",
        "node1",
    ]
    assert leader.env["SGLANG_RUST_BUILD_MODE"] == "never"
    # the second prefill node publishes KV events: it runs a sidecar too, on its own ports
    second = p.unit("prefill_0_node2").argv[2]
    assert "--port 0 " in second
    assert "tcp://*:5202" in second  # its own KV-event ports (one per data-parallel rank)
    # decode without kv_events: only its leader pairs with a sidecar
    assert p.unit("decode_0_node3").argv[0] == "bash"
    assert p.unit("decode_0_node4").argv[:3] == ("python3", "-m", "sglang.launch_server")


def test_trtllm_workers_sharing_a_node_each_see_their_own_gpu() -> None:
    body = (
        "engine: {type: trtllm, served_model_name: org/m}\n"
        "roles:\n"
        "  agg: {nodes: 1, workers: 2, gpus: 1}\n"
        "frontend: {type: dynamo, enable_multiple_frontends: false}\n"
    )
    p = plan(body)
    first, second = p.unit("agg_0_node1"), p.unit("agg_1_node1")
    assert first.argv[0] == "trtllm-llmapi-launch"  # one GPU or many
    assert (first.env["CUDA_VISIBLE_DEVICES"], second.env["CUDA_VISIBLE_DEVICES"]) == ("0", "1")
    assert (first.env["MASTER_PORT"], second.env["MASTER_PORT"]) == ("29500", "29501")
    assert first.env["TRTLLM_EPLB_SHM_NAME"] != second.env["TRTLLM_EPLB_SHM_NAME"]


def test_vllm_kv_event_port_reaches_the_worker() -> None:
    body = (
        "engine: vllm\n"
        "roles:\n"
        "  agg: {nodes: 1, workers: 2, gpus: 1}\n"
        "frontend: {type: dynamo, enable_multiple_frontends: false}\n"
    )
    p = plan(body)
    assert [p.unit(u).env["DYN_VLLM_KV_EVENT_PORT"] for u in ("agg_0_node1", "agg_1_node1")] == ["5200", "5201"]
    argv = p.unit("agg_1_node1").argv
    # an aggregated Dynamo worker still gets the default NIXL connector
    assert json.loads(argv[argv.index("--kv-transfer-config") + 1]) == {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_both",
    }


def test_dynamo_install_runs_as_root_before_every_dynamo_process() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  agg: {nodes: 1, workers: 1}\n"
        "dynamo: {source: {pypi: '1.4.2'}}\n"
        "frontend: {type: dynamo, enable_multiple_frontends: false}\n"
    )
    p = plan(body)
    for name in ("agg_0_node1", "frontend_0"):
        unit = p.unit(name)
        assert unit.srun.export_env == {"ENROOT_REMAP_ROOT": "yes"}
        assert unit.preamble is not None
        assert "ai-dynamo-runtime==1.4.2 ai-dynamo==1.4.2" in unit.preamble
        assert "flock -x 200" in unit.preamble
    # services are no Dynamo processes: nothing installed there
    assert not any("pip install" in (u.preamble or "") for u in p.units if u.kind == UnitKind.SERVICE)


_SGLANG_DYNAMO = (
    "engine: sglang\n"
    "roles:\n"
    "  agg: {nodes: 1, workers: 1}\n"
    "frontend: {type: dynamo, enable_multiple_frontends: false}\n"
)


def test_without_a_source_the_default_release_is_installed() -> None:
    # srtctl's DynamoConfig: `install` is on by default and installs its DEFAULT_PYPI_VERSION
    for body in (_SGLANG_DYNAMO, _SGLANG_DYNAMO + "dynamo: {request_plane: tcp}\n"):
        worker = plan(body).unit("agg_0_node1")
        assert worker.srun.export_env == {"ENROOT_REMAP_ROOT": "yes"}
        assert "ai-dynamo-runtime==0.8.0 ai-dynamo==0.8.0" in (worker.preamble or "")
        # the install srtd adds on its own is said once, with the way out
        assert [w for w in plan(body).warnings if w.startswith("dynamo:")] == [
            "dynamo: no `source` named, so every Dynamo step installs srtctl's default release 0.8.0 first; "
            "say `dynamo.install: false` if the image ships Dynamo"
        ]


def test_install_false_installs_nothing() -> None:
    p = plan(_SGLANG_DYNAMO + "dynamo: {install: false}\n")
    assert not [w for w in p.warnings if w.startswith("dynamo:")]
    for name in ("agg_0_node1", "frontend_0"):
        assert p.unit(name).srun.export_env == {}
        assert "pip install" not in (p.unit(name).preamble or "")


def test_top_of_tree_builds_dynamos_head() -> None:
    preamble = plan(_SGLANG_DYNAMO + "dynamo: {top_of_tree: true}\n").unit("agg_0_node1").preamble or ""
    assert "fetch -q --depth 1 https://github.com/ai-dynamo/dynamo HEAD" in preamble
    assert "maturin build --release" in preamble
    assert "ai-dynamo==" not in preamble  # no release pinned
    assert ".srtd_dynamo_top_of_tree.done" in preamble


def test_top_of_tree_with_a_source_is_refused_at_its_line() -> None:
    problems = load_problems(_SGLANG_DYNAMO + "dynamo:\n  top_of_tree: true\n  source: {pypi: '1.4.2'}\n")
    assert problems == [
        (
            11,  # the `top_of_tree:` line
            "dynamo.top_of_tree",
            "builds Dynamo's head, so it cannot go with `source`; pin a commit in source.rev",
        )
    ]


def test_sglang_auto_endpoints_get_ports_of_their_own() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  agg:\n"
        "    nodes: 1\n"
        "    workers: 2\n"
        "    gpus: 1\n"
        "    kv_events: {replay_endpoint: auto}\n"
        "    args: {load-publish-endpoint: auto}\n"
        "frontend: {type: sglang-router, enable_multiple_frontends: false}\n"
    )
    argv = plan(body).unit("agg_1_node1").argv
    # srtctl's bases (19000, 18000) and key order: defaults, the recipe's keys, the endpoint last
    assert argv[argv.index("--kv-events-config") + 1] == (
        '{"publisher": "zmq", "topic": "kv-events", "replay_endpoint": "tcp://*:19001", "endpoint": "tcp://*:5201"}'
    )
    assert argv[argv.index("--load-publish-endpoint") + 1] == "tcp://*:18001"


def test_sgl_router_gets_every_worker_as_a_bare_binary() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  prefill: {nodes: 1, workers: 2, gpus: 1, args: {served-model-name: org/m}}\n"
        "  decode: {nodes: 1, workers: 1, gpus: 1}\n"
        "frontend:\n"
        "  type: sgl-router\n"
        "  enable_multiple_frontends: false\n"
        "  args: {policy: cache_aware}\n"
    )
    router = plan(body).unit("frontend_0")
    # prefill and decode alike under --worker-urls (no --pd-disaggregation), then the served model
    assert router.argv == (
        "/usr/local/bin/sgl-router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--worker-urls",
        "http://node1:6100",
        "http://node1:6132",
        "http://node2:6100",
        "--model-id",
        "org/m",
        "--policy",
        "cache_aware",
    )
    assert router.srun.shell is False


def test_sglang_with_enable_lmcache_finds_the_lmcache_server_on_its_node() -> None:
    body = (
        "engine: sglang\n"
        "roles:\n"
        "  prefill: {nodes: 1, workers: 1, args: {enable-lmcache: true}}\n"
        "  decode: {nodes: 1, workers: 1, args: {enable-lmcache: true}}\n"
        "services:\n"
        "  - {name: lmcache, type: lmcache-server, placement: {node: prefill}}\n"
        "frontend: {type: sglang-router, enable_multiple_frontends: false}\n"
    )
    p = plan(body)
    prefill = p.unit("prefill_0_node1")
    assert {k: v for k, v in prefill.env.items() if k.startswith("LMCACHE")} == {
        "LMCACHE_MP_HOST": "127.0.0.1",
        "LMCACHE_MP_PORT": "8750",
    }
    assert "--enable-lmcache" in prefill.argv
    # no server on decode's node: SGLang keeps its in-process LMCache there
    assert not [k for k in p.unit("decode_0_node2").env if k.startswith("LMCACHE")]
