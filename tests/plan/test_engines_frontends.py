"""Engines and frontends: worker argv per engine and launch mode, role args as flags, the
frontend gates as data, nginx replicas, the teardown budget and the sbatch script.

References: srtctl-behaviour.md §1.3 (workers), §1.4 (frontends), §5.5 (ports), §6 (the gate),
§7.2 (sbatch); ai-dynamo 1.6.1's `dynamo/mocker/args.py` for the mocker's flags.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

import srtd.cli._commands  # noqa: F401
from srtd.cli._main import cli
from srtd.cli._submit import srtd_command
from srtd.cluster import Cluster
from srtd.engines import flags
from srtd.engines._trtllm import TRTLLM_FATAL
from srtd.errors import PlanError, RecipeError
from srtd.launch import srun_nodelist
from srtd.patterns import compile_log_pattern
from srtd.plan._render import sbatch_script
from srtd.unit import Count, HttpProbe, LogProbe, TcpProbe, WorkerCountProbe
from tests.plan._util import HEAD, after, plan

ROOT = Path(__file__).resolve().parents[2]

SGLANG_PD = """\
engine: sglang
roles:
  prefill:
    nodes: 1
    workers: 2
    gpus: 4
    args: {{tensor-parallel-size: 4, disaggregation-transfer-backend: nixl}}
  decode:
    nodes: 1
    workers: 1
    args: {{tensor-parallel-size: 8}}
frontend: {{type: {frontend}, enable_multiple_frontends: false}}
"""

# --------------------------------------------------------------------------- role args as flags


def test_flags_from_a_mapping() -> None:
    args = {
        "on": True,
        "off": False,
        "unset": None,
        "tp": 4,
        "ratio": 0.85,
        "name": "x y",
        "many": ["a", 1],
        "json": {"a": 1, "b": [1, 2], "c": True},
    }
    assert flags(args) == [
        "--on",
        "--tp",
        "4",
        "--ratio",
        "0.85",
        "--name",
        "x y",
        "--many",
        "a",
        "1",
        "--json",
        '{"a":1,"b":[1,2],"c":true}',
    ]
    assert flags({"many": ["a", "b"]}, lists="repeat") == ["--many", "a", "--many", "b"]
    assert flags({"empty": []}) == ["--empty"]


def test_role_args_are_appended_as_flags_with_node_placeholders() -> None:
    body = """\
engine: sglang
roles:
  agg:
    nodes: 1
    workers: 1
    args:
      enable-metrics: true
      disable-radix-cache: false
      chunked-prefill-size: null
      mem-fraction-static: 0.8
      cuda-graph-bs: [1, 2, 4]
      json-model-override-args: {rope_scaling: {factor: 4}}
      dump-dir: /logs/{node}
    extra_args: [--raw, "1"]
frontend: {type: sglang-router, enable_multiple_frontends: false}
"""
    argv = plan(body).unit("agg_0_node1").argv
    assert argv[argv.index("17500") + 1 :] == (
        "--enable-metrics",
        "--mem-fraction-static",
        "0.8",
        "--cuda-graph-bs",
        "1",
        "2",
        "4",
        "--json-model-override-args",
        '{"rope_scaling":{"factor":4}}',
        "--dump-dir",
        "/logs/node1",
        "--raw",
        "1",
    )


# --------------------------------------------------------------------------- SGLang


def test_sglang_under_dynamo() -> None:
    p = plan(SGLANG_PD.format(frontend="dynamo"))
    prefill, decode = p.unit("prefill_1_node1"), p.unit("decode_0_node2")
    assert prefill.argv == (
        "python3",
        "-m",
        "dynamo.sglang",
        "--model-path",
        "/model",
        "--served-model-name",
        "m",
        "--host",
        "0.0.0.0",
        "--port",
        "6132",
        "--nccl-port",
        "17501",
        "--enable-metrics",
        "--request-plane",
        "tcp",
        "--dump-config-to",
        "/logs/workers/node1_config.json",
        "--disaggregation-mode",
        "prefill",
        "--disaggregation-bootstrap-port",
        "7201",
        "--tensor-parallel-size",
        "4",
        "--disaggregation-transfer-backend",
        "nixl",
    )
    assert decode.argv == (
        "python3",
        "-m",
        "dynamo.sglang",
        "--model-path",
        "/model",
        "--served-model-name",
        "m",
        "--host",
        "0.0.0.0",
        "--port",
        "6100",
        "--nccl-port",
        "17502",
        "--enable-metrics",
        "--request-plane",
        "tcp",
        "--dump-config-to",
        "/logs/workers/node2_config.json",
        "--disaggregation-mode",
        "decode",
        "--tensor-parallel-size",
        "8",
    )
    assert list(decode.env.items()) == [
        ("SRTD_JOB_ID", "local"),
        ("SRTD_LOG_DIR", "/logs"),
        ("HEAD_NODE_IP", "node1"),
        ("ETCD_ENDPOINTS", "http://node1:2379"),
        ("DYN_REQUEST_PLANE", "tcp"),
        ("DYN_SKIP_SGLANG_LOG_FORMATTING", "1"),
        ("DYN_LOG", "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn"),
        ("DYN_SYSTEM_PORT", "7502"),
        ("DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", '["generate"]'),
        ("SGLANG_CUDA_COREDUMP_BEFORE_CRASH", "0"),
        ("SGLANG_PYSPY_DUMP_BEFORE_CRASH", "0"),
    ]
    # a Dynamo worker is healthy when its system port says so
    assert decode.readiness is not None
    assert decode.readiness.probe == HttpProbe(node="node2", port=7502, path="/health")
    assert (decode.readiness.timeout_seconds, decode.readiness.interval_seconds) == (1800.0, 10.0)
    assert (decode.terminate_timeout, decode.tier, decode.critical) == (30.0, 0, True)
    assert decode.log == "workers/node2_decode_w0.out"  # relative to the log dir
    assert decode.container is not None
    assert decode.container.image == "img.sqsh"
    assert decode.container.mounts == {"outputs/local/logs": "/logs", "/models/m": "/model"}


def test_sglang_direct_behind_the_sglang_router() -> None:
    p = plan(SGLANG_PD.format(frontend="sglang-router"))
    prefill = p.unit("prefill_0_node1")
    assert prefill.argv[:19] == (
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/model",
        "--served-model-name",
        "m",
        "--host",
        "0.0.0.0",
        "--port",
        "6100",
        "--nccl-port",
        "17500",
        "--enable-metrics",
        "--disaggregation-mode",
        "prefill",
        # behind a router: no lone warmup request
        "--skip-server-warmup",
        "--disaggregation-bootstrap-port",
        "7200",
    )
    assert not any(k.startswith("DYN_") or k == "ETCD_ENDPOINTS" for k in prefill.env)
    assert prefill.readiness is not None
    assert prefill.readiness.probe == HttpProbe(node="node1", port=6100, path="/health")
    router = p.unit("frontend_0")
    assert router.argv == (
        "python3",
        "-m",
        "sglang_router.launch_router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--pd-disaggregation",
        "--prefill",
        "http://node1:6100",
        "7200",
        "--prefill",
        "http://node1:6132",
        "7201",
        "--decode",
        "http://node2:6100",
        "--prometheus-port",
        "29000",
        "--prometheus-host",
        "0.0.0.0",
    )
    assert router.srun.mpi is None
    assert (router.terminate_timeout, router.log) == (20.0, "workers/node1_router_0.out")


def test_sglang_router_aggregated_takes_worker_urls_and_its_args() -> None:
    body = """\
engine: sglang
roles:
  agg: {nodes: 2, workers: 2}
frontend: {type: sglang-router, enable_multiple_frontends: false, args: {policy: cache_aware, log-level: debug}}
"""
    assert plan(body, addresses={"node1": "10.0.0.1", "node2": "10.0.0.2"}).unit("frontend_0").argv == (
        "python3",
        "-m",
        "sglang_router.launch_router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--worker-urls",
        "http://10.0.0.1:6100",
        "http://10.0.0.2:6100",
        "--prometheus-port",
        "29000",
        "--prometheus-host",
        "0.0.0.0",
        "--policy",
        "cache_aware",
        "--log-level",
        "debug",
    )


def test_disaggregation_mode_in_role_args_must_match_the_role() -> None:
    from tests.plan._util import check_problems

    body = SGLANG_PD.format(frontend="dynamo").replace(
        "args: {tensor-parallel-size: 8}", "args: {tensor-parallel-size: 8, disaggregation-mode: prefill, port: 1}"
    )
    assert check_problems(body) == [
        (16, "roles.decode.args.disaggregation-mode", "must be 'decode' on the decode role, got 'prefill'"),
        (16, "roles.decode.args.port", "srtd sets --port itself; leave it out"),
    ]


# --------------------------------------------------------------------------- vLLM


def test_vllm_under_dynamo() -> None:
    body = """\
engine: {type: vllm, connector: nixl}
roles:
  prefill: {nodes: 1, workers: 1, args: {tensor-parallel-size: 8}}
  decode: {nodes: 1, workers: 1, args: {connector: lmcache, tensor-parallel-size: 8}}
frontend: {type: dynamo, enable_multiple_frontends: false}
"""
    p = plan(body)
    assert p.unit("prefill_0_node1").argv == (
        "python3",
        "-m",
        "dynamo.vllm",
        "--model",
        "/model",
        "--served-model-name",
        "m",
        "--disaggregation-mode",
        "prefill",
        "--kv-transfer-config",
        '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}',
        "--device-ids",
        "0,1,2,3,4,5,6,7",
        "--request-plane",
        "tcp",
        "--dump-config-to",
        "/logs/workers/node1_config.json",
        "--tensor-parallel-size",
        "8",
    )
    # a role's own connector wins, and `connector` is not passed on as a vLLM flag
    assert p.unit("decode_0_node2").argv == (
        "python3",
        "-m",
        "dynamo.vllm",
        "--model",
        "/model",
        "--served-model-name",
        "m",
        "--disaggregation-mode",
        "decode",
        "--kv-transfer-config",
        '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}',
        "--device-ids",
        "0,1,2,3,4,5,6,7",
        "--request-plane",
        "tcp",
        "--dump-config-to",
        "/logs/workers/node2_config.json",
        "--tensor-parallel-size",
        "8",
    )
    env = p.unit("decode_0_node2").env
    assert (env["VLLM_PORT"], env["VLLM_NIXL_SIDE_CHANNEL_PORT"], env["VLLM_NIXL_SIDE_CHANNEL_HOST"]) == (
        "20050",
        "5401",
        "node2",
    )


def test_vllm_aggregated_direct_serve() -> None:
    body = """\
engine: vllm
roles:
  agg: {nodes: 1, workers: 2, args: {max-model-len: 4096}}
frontend: {type: vllm-router, enable_multiple_frontends: false}
"""
    p = plan(body)
    assert p.unit("agg_1_node1").argv == (
        "vllm",
        "serve",
        "/model",
        "--host",
        "0.0.0.0",
        "--port",
        "6132",
        "--served-model-name",
        "m",
        # vLLM picks its GPU by flag, not by CUDA_VISIBLE_DEVICES (unless engine.set_visible_devices)
        "--device-ids",
        "4,5,6,7",
        "--max-model-len",
        "4096",
    )
    assert "CUDA_VISIBLE_DEVICES" not in p.unit("agg_1_node1").env
    assert p.unit("frontend_0").argv == (
        "vllm-router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--worker-urls",
        "http://node1:6100",
        "http://node1:6132",
        "--worker-startup-timeout-secs",
        "1800",
    )


def test_vllm_router_disaggregated_uses_the_vllm_pd_mode() -> None:
    body = """\
engine: {type: vllm, connector: nixl}
roles:
  prefill: {nodes: 1, workers: 1, gpus: 1}
  decode: {nodes: colocate, workers: 1, gpus: 1}
frontend: {type: vllm-router, enable_multiple_frontends: false}
"""
    argv = plan(body).unit("frontend_0").argv
    assert "--vllm-pd-disaggregation" in argv
    assert "--pd-disaggregation" not in argv


# --------------------------------------------------------------------------- TensorRT-LLM


TRTLLM = """\
engine: {type: trtllm, served_model_name: org/model}
roles:
  prefill: {nodes: 1, workers: 1, gpus: 4, args: {tensor_parallel_size: 4, kv_cache_config: {dtype: fp8}}}
  decode: {nodes: 4, workers: 1, gpus: 16, args: {tensor_parallel_size: 16}}
health_check: {extra_fatal_log_patterns: ["CUDA error: out of memory"]}
frontend: {type: dynamo, enable_multiple_frontends: false}
"""


def test_trtllm_one_mpi_step_per_endpoint() -> None:
    head = HEAD.replace("gpus_per_node: 8", "gpus_per_node: 4")
    p = plan(TRTLLM, head=head)
    workers = [u for u in p.units if u.role in ("prefill", "decode")]
    assert [(u.name, u.nodes) for u in workers] == [
        ("prefill_0_node1", ("node1",)),
        ("decode_0_node2", ("node2", "node3", "node4", "node5")),
    ]
    decode = p.unit("decode_0_node2")
    assert asdict(decode.srun) == {
        "ntasks": 16,
        "mpi": "pmix",
        "oversubscribe": True,
        "cpus_per_task": None,
        "cpu_bind": "verbose,none",
        "het_group": None,
        # one host per rank, in srtd's node order: rank 0 runs on MASTER_ADDR's node
        "options": {"kill-on-bad-exit": "1", "ntasks-per-node": "4", "distribution": "arbitrary"},
        "export_env": {"ENROOT_REMAP_ROOT": "yes"},  # no `dynamo:` section: the default release is installed
        "shell": True,
    }
    assert srun_nodelist(decode) == [n for n in ("node2", "node3", "node4", "node5") for _ in range(4)]
    assert decode.env["MASTER_ADDR"] == "node2"
    # a one-node endpoint keeps Slurm's default layout
    assert "distribution" not in p.unit("prefill_0_node1").srun.options
    assert decode.argv == (
        "trtllm-llmapi-launch",
        "python3",
        "-m",
        "dynamo.trtllm",
        "--model-path",
        "/model",
        "--served-model-name",
        "org/model",
        "--disaggregation-mode",
        "decode",
        "--extra-engine-args",
        "/logs/trtllm_config_decode.yaml",
        "--request-plane",
        "tcp",
        "--publish-metrics",
    )
    # the endpoint's ranks meet at its first node; each endpoint its own port and EPLB segment
    assert (decode.env["MASTER_ADDR"], decode.env["MASTER_PORT"]) == ("node2", "29501")
    assert decode.env["TRTLLM_EPLB_SHM_NAME"] == "srtd_eplb_local_decode_0"
    assert p.files["outputs/local/logs/trtllm_config_prefill.yaml"] == (
        "tensor_parallel_size: 4\nkv_cache_config:\n  dtype: fp8\n"
    )
    assert decode.fatal_patterns == (
        r"^Rank\d+ Task exit code: (?:[1-9]\d*|0\d+)$",
        "Failed to initialize executor",
        "CUDA error: out of memory",
    )
    assert decode.readiness is not None
    assert decode.readiness.probe == TcpProbe(node="node2", port=decode.ports["sys"])
    assert "CUDA_VISIBLE_DEVICES" not in p.unit("prefill_0_node1").env  # a whole node: no pinning


def test_trtllm_fatal_pattern_matches_only_a_failing_rank() -> None:
    pattern = compile_log_pattern(TRTLLM_FATAL[0])  # as the unit's watcher runs it: RE2
    assert pattern.search("Rank12 Task exit code: 1")
    assert pattern.search("Rank0 Task exit code: 137")
    assert pattern.search("Rank0 Task exit code: 00")
    assert not pattern.search("Rank3 Task exit code: 0")
    assert not pattern.search("Rank3 Task exit code: 0 ")
    assert not pattern.search("Rank3 Task exit code: 01x")


def test_fatal_markers_off_drops_every_pattern() -> None:
    head = HEAD.replace("gpus_per_node: 8", "gpus_per_node: 4")
    body = TRTLLM.replace('health_check: {extra_fatal_log_patterns: ["CUDA error: out of memory"]}', "")
    body += "health_check: {fatal_log_markers: false, extra_fatal_log_patterns: [boom]}\n"
    assert plan(body, head=head).unit("decode_0_node2").fatal_patterns == ()


# --------------------------------------------------------------------------- mocker


# Every option of `python -m dynamo.mocker` in ai-dynamo 1.6.1 (dynamo/mocker/args.py), and
# which of them take no value.
MOCKER_1_6_1 = frozenset(
    [
        "--active-decode-blocks-threshold",
        "--active-prefill-tokens-threshold",
        "--active-prefill-tokens-threshold-frac",
        "--aic-attention-dp-size",
        "--aic-backend",
        "--aic-backend-version",
        "--aic-moe-ep-size",
        "--aic-moe-tp-size",
        "--aic-mtp-seed",
        "--aic-nextn",
        "--aic-nextn-accept-rates",
        "--aic-perf-model",
        "--aic-system",
        "--aic-tp-size",
        "--ais-attention-dp-size",
        "--ais-backend",
        "--ais-backend-version",
        "--ais-moe-ep-size",
        "--ais-moe-tp-size",
        "--ais-mtp-seed",
        "--ais-nextn",
        "--ais-nextn-accept-rates",
        "--ais-perf-config",
        "--ais-perf-model",
        "--ais-system",
        "--ais-tp-size",
        "--assume-kv-reuse",
        "--block-size",
        "--bootstrap-ports",
        "--data-parallel-size",
        "--decode-speedup-ratio",
        "--disaggregation-mode",
        "--discovery-backend",
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
        "--enable-session-prefix-index",
        "--endpoint",
        "--engine-type",
        "--event-plane",
        "--extra-engine-args",
        "--free-gpu-memory-fraction",
        "--gpu-memory-utilization",
        "--host-offload-d2h-bandwidth-gbps",
        "--host-offload-h2d-bandwidth-gbps",
        "--is-decode-worker",
        "--is-prefill-worker",
        "--kv-bytes-per-token",
        "--kv-cache-dtype",
        "--kv-events",
        "--kv-overlap-score-weight",
        "--kv-transfer-bandwidth",
        "--kv-transfer-timing-mode",
        "--load-aware",
        "--max-model-len",
        "--max-num-batched-tokens",
        "--max-num-seqs",
        "--mem-fraction-static",
        "--model-name",
        "--model-path",
        "--no-assume-kv-reuse",
        "--no-enable-chunked-prefill",
        "--no-enable-prefix-caching",
        "--no-enable-session-prefix-index",
        "--no-kv-events",
        "--no-load-aware",
        "--num-gpu-blocks-override",
        "--num-host-blocks",
        "--num-workers",
        "--planner-profile-data",
        "--preemption-mode",
        "--reasoning",
        "--request-plane",
        "--response-plane",
        "--response-replay-trace-path",
        "--router-mode",
        "--sglang-chunked-prefill-size",
        "--sglang-clip-max-new-tokens",
        "--sglang-generate",
        "--sglang-max-prefill-tokens",
        "--sglang-page-size",
        "--sglang-schedule-conservativeness",
        "--sglang-schedule-policy",
        "--shared-cache-multiplier",
        "--shared-cache-type",
        "--speedup-ratio",
        "--stagger-delay",
        "--startup-time",
        "--trtllm-capacity-scheduler-policy",
        "--use-remote-indexer",
        "--zmq-kv-events-ports",
        "--zmq-replay-ports",
    ]
)
MOCKER_SWITCHES = frozenset(
    {
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
        "--is-prefill-worker",
        "--is-decode-worker",
    }
)

MOCKER = """\
engine:
  type: mocker
  engine_type: sglang
  speedup_ratio: 10
  decode_speedup_ratio: 2
  block_size: 64
  data_parallel_size: 2
  startup_time: 1.5
  kv_transfer_bandwidth: 64
  kv_cache_dtype: fp8
  enable_prefix_caching: false
  enable_chunked_prefill: false
  preemption_mode: lifo
  num_workers: {workers}
roles:
  prefill: {{nodes: 1, workers: 1, gpus: 4}}
  decode: {{nodes: colocate, workers: 1, gpus: 4}}
frontend: {{type: dynamo, enable_multiple_frontends: false}}
"""


def mocker_options(argv: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(flag, value) pairs of a mocker argv, checked against 1.6.1's parser table."""
    assert argv[:3] == ("python3", "-m", "dynamo.mocker")
    out: list[tuple[str, str | None]] = []
    rest = list(argv[3:])
    while rest:
        flag = rest.pop(0)
        assert flag in MOCKER_1_6_1, f"{flag} is not a flag of dynamo.mocker 1.6.1"
        if flag in MOCKER_SWITCHES:
            out.append((flag, None))
        else:
            assert rest, f"{flag} needs a value"
            assert not rest[0].startswith("--"), f"{flag} needs a value"
            out.append((flag, rest.pop(0)))
    return out


def test_mocker_flags_are_dynamo_1_6_1_flags() -> None:
    p = plan(MOCKER.format(workers=1))
    assert mocker_options(p.unit("prefill_0_node1").argv) == [
        ("--model-path", "/model"),
        ("--model-name", "m"),  # the checkpoint directory's name on the host
        ("--engine-type", "sglang"),
        ("--speedup-ratio", "10.0"),
        ("--decode-speedup-ratio", "2.0"),
        ("--data-parallel-size", "2"),
        ("--num-gpu-blocks-override", "16384"),
        ("--max-num-seqs", "256"),
        ("--max-num-batched-tokens", "8192"),
        ("--block-size", "64"),
        ("--startup-time", "1.5"),
        ("--kv-transfer-bandwidth", "64"),
        ("--kv-cache-dtype", "fp8"),
        ("--no-enable-prefix-caching", None),
        ("--no-enable-chunked-prefill", None),
        ("--preemption-mode", "lifo"),
        ("--disaggregation-mode", "prefill"),
        ("--bootstrap-ports", "7200"),
    ]
    decode = mocker_options(p.unit("decode_0_node1").argv)
    assert ("--disaggregation-mode", "decode") in decode
    assert not any(flag == "--bootstrap-ports" for flag, _ in decode)
    # defaults only
    plain = plan("engine: mocker\nroles:\n  agg: {nodes: 1, workers: 1}\nfrontend: {type: dynamo}\n")
    assert mocker_options(plain.unit("agg_0_node1").argv) == [
        ("--model-path", "/model"),
        ("--model-name", "m"),  # the checkpoint directory's name on the host
        ("--engine-type", "vllm"),
        ("--speedup-ratio", "100.0"),  # printed as srtctl prints it
        ("--data-parallel-size", "1"),
        ("--num-gpu-blocks-override", "16384"),
        ("--max-num-seqs", "256"),
        ("--max-num-batched-tokens", "8192"),
    ]


def test_mocker_gate_counts_every_registration() -> None:
    p = plan(MOCKER.format(workers=3))
    gate = p.unit("frontend_0").readiness
    assert gate is not None
    assert isinstance(gate.probe, WorkerCountProbe)
    # num_workers x data_parallel_size registrations per worker process
    assert (gate.probe.expect_prefill, gate.probe.expect_decode) == (6, 6)


def test_mocker_bootstrap_ports_one_per_mocker_worker() -> None:
    argv = plan(MOCKER.format(workers=2)).unit("prefill_0_node1").argv
    ports = argv[argv.index("--bootstrap-ports") + 1].split(",")
    assert len(ports) == 2
    assert len(set(ports)) == 2


# --------------------------------------------------------------------------- custom, toy


CUSTOM = """\
engine:
  type: custom
  command: [serve, --host, "{{host}}", --port, "{{port}}", "{{role}}-{{index}}@{{node}}", "gpus={{gpus}}", "{{nope}}"]
  fatal_log_patterns: [Traceback]
  health: {health}
roles:
  agg: {{nodes: 1, workers: 2, gpus: 4, args: {{verbose: true}}}}
frontend: {{type: none}}
"""


def test_custom_engine_placeholders_and_its_own_port_probe() -> None:
    p = plan(CUSTOM.format(health="{http: {path: /ready}, timeout_seconds: 60}"), addresses={"node1": "10.0.0.1"})
    second = p.unit("agg_1_node1")
    assert second.argv == (
        "serve",
        "--host",
        "10.0.0.1",
        "--port",
        "6132",
        "agg-1@node1",
        "gpus=4,5,6,7",
        "{nope}",
        "--verbose",
    )
    assert second.readiness is not None
    assert second.readiness.probe == HttpProbe(node="node1", port=6132, path="/ready")
    assert second.readiness.timeout_seconds == 60
    assert second.fatal_patterns == ("Traceback",)
    assert second.env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    # frontend none: no gate, the job holds (manual benchmark)
    assert p.gate is None
    assert p.hold is True


@pytest.mark.parametrize(
    ("health", "probe"),
    [
        ("{tcp: {}}", TcpProbe(node="node1", port=6100)),
        ("{port: 7000}", TcpProbe(node="node1", port=7000)),
        ("{http: {port: 7001, path: /h, status: 204}}", HttpProbe(node="node1", port=7001, path="/h", status=204)),
        ("{log: {pattern: listening}}", LogProbe(pattern="listening")),
    ],
)
def test_custom_engine_probe_shapes(health: str, probe: object) -> None:
    unit = plan(CUSTOM.format(health=health)).unit("agg_0_node1")
    assert unit.readiness is not None
    assert unit.readiness.probe == probe


def test_toy_engine_behind_the_toy_router() -> None:
    body = """\
engine: {type: toy, token_latency_ms: 3}
roles:
  prefill: {nodes: 1, workers: 1, gpus: 1, args: {startup-delay: 0.5}}
  decode: {nodes: colocate, workers: 1, gpus: 1}
frontend: {type: toy-router, enable_multiple_frontends: false}
"""
    p = plan(body, local=True)
    assert p.unit("prefill_0_node1").argv == (
        "srtd-toy-worker",
        "--host",
        "127.0.0.1",
        "--port",
        "6100",
        "--model",
        "toy",
        "--role",
        "prefill",
        "--token-latency-ms",
        "3",
        "--startup-delay",
        "0.5",
    )
    assert p.unit("frontend_0").argv == (
        "srtd-toy-router",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--prefill",
        "http://127.0.0.1:6100",
        "--decode",
        "http://127.0.0.1:6132",
    )
    assert p.unit("prefill_0_node1").container is None
    assert "CUDA_VISIBLE_DEVICES" not in p.unit("prefill_0_node1").env


# --------------------------------------------------------------------------- frontend gates


def test_dynamo_gate_counts_generate_instances_by_component() -> None:
    p = plan(SGLANG_PD.format(frontend="dynamo"))
    assert p.gate == "frontend_0"
    gate = p.unit("frontend_0").readiness
    assert gate is not None
    assert gate.probe == WorkerCountProbe(
        node="node1",
        port=8000,
        path="/health",
        prefill=(Count(items="instances", where={"endpoint": "generate", "component": "prefill"}),),
        decode=(
            Count(
                items="instances", where={"endpoint": "generate", "component": ["decode", "tensorrt_llm", "backend"]}
            ),
        ),
        expect_prefill=2,
        expect_decode=1,
    )
    assert (gate.timeout_seconds, gate.interval_seconds) == (1800.0, 10.0)
    fe = p.unit("frontend_0")
    assert fe.argv == ("python3", "-m", "dynamo.frontend", "--http-port=8000")
    assert fe.srun.mpi == "pmix"
    # the frontend only needs the workers started: the gate counts them itself
    assert after(p, "frontend_0") == [
        ("prefill_0_node1", "started"),
        ("prefill_1_node1", "started"),
        ("decode_0_node2", "started"),
    ]


def test_router_gate_reads_worker_stats_and_aggregated_workers_count_as_decode() -> None:
    body = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 4, gpus: 2}
frontend: {type: sglang-router, enable_multiple_frontends: false}
health_check: {max_attempts: 30, interval_seconds: 5}
"""
    gate = plan(body).unit("frontend_0").readiness
    assert gate is not None
    assert gate.probe == WorkerCountProbe(
        node="node1",
        port=8000,
        path="/workers",
        prefill=(Count(field="stats.prefill_count"),),
        decode=(Count(field="stats.decode_count"), Count(field="stats.regular_count")),
        expect_prefill=0,
        expect_decode=4,
    )
    assert gate.timeout_seconds == 150.0


@pytest.mark.parametrize("frontend", ["sglang", "vllm"])
def test_a_direct_server_is_the_gate(frontend: str) -> None:
    body = f"engine: {frontend}\nroles:\n  agg: {{nodes: 1, workers: 1}}\nfrontend: {{type: {frontend}}}\n"
    p = plan(body)
    assert p.gate == "agg_0_node1"
    worker = p.unit("agg_0_node1")
    assert worker.ports["http"] == 8000
    assert [u.name for u in p.units] == ["agg_0_node1"]
    assert "--port" in worker.argv
    assert worker.argv[worker.argv.index("--port") + 1] == "8000"


@pytest.mark.parametrize(("engine", "frontend"), [("sglang", "sglang"), ("vllm", "vllm"), ("trtllm", "trtllm_serve")])
def test_a_direct_server_gate_probes_the_port_it_binds(engine: str, frontend: str) -> None:
    body = f"engine: {engine}\nroles:\n  agg: {{nodes: 1, workers: 1}}\nfrontend: {{type: {frontend}}}\n"
    p = plan(body)
    assert p.gate == "agg_0_node1"
    worker = p.unit("agg_0_node1")
    assert worker.argv[worker.argv.index("--port") + 1] == "8000"
    assert worker.readiness is not None
    assert getattr(worker.readiness.probe, "port", None) == 8000


@pytest.mark.parametrize("frontend", ["sglang", "vllm"])
def test_a_direct_server_gate_waits_for_v1_models(frontend: str) -> None:
    body = f"engine: {frontend}\nroles:\n  agg: {{nodes: 1, workers: 1}}\nfrontend: {{type: {frontend}}}\n"
    worker = plan(body).unit("agg_0_node1")
    assert worker.readiness is not None
    assert worker.readiness.probe == WorkerCountProbe(
        node="node1", port=8000, path="/v1/models", decode=(Count(items="data"),), expect_decode=1
    )


def test_a_direct_frontend_with_several_workers_is_refused_at_the_workers_key() -> None:

    from tests.plan._util import check_problems

    body = "engine: sglang\nroles:\n  agg: {nodes: 1, workers: 2}\nfrontend: {type: sglang}\n"
    assert check_problems(body) == [
        (
            8,
            "roles.agg.workers",
            "frontend `sglang` has no router: its one worker binds port 8000, but roles.agg has 2 workers; "
            "use a router frontend (sglang-router, vllm-router, dynamo) for several",
        )
    ]


def test_trtllm_serve_disaggregated_orchestrator() -> None:
    body = """\
engine: trtllm
roles:
  prefill: {nodes: 1, workers: 2, gpus: 4}
  decode: {nodes: 1, workers: 1}
frontend: {type: trtllm_serve}
"""
    p = plan(body)
    assert p.gate == "trtllm_serve_orchestrator"
    orch = p.unit("trtllm_serve_orchestrator")
    assert orch.argv == ("trtllm-serve", "disaggregated", "--config", "/logs/ser.yaml")
    assert orch.readiness is not None
    assert orch.readiness.probe == HttpProbe(node="node1", port=8000, path="/health")
    assert orch.log == "workers/node1_frontend_0.out"  # srtctl names the orchestrator the job's frontend
    assert p.files["outputs/local/logs/ser.yaml"] == (
        "hostname: 0.0.0.0\nport: 8000\nbackend: pytorch\n"
        "context_servers:\n  num_instances: 2\n  urls:\n    - node1:6100\n    - node1:6132\n"
        "generation_servers:\n  num_instances: 1\n  urls:\n    - node2:6100\n"
    )


# --------------------------------------------------------------------------- nginx and replicas


def test_nginx_in_front_of_frontend_replicas() -> None:
    body = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 2, workers: 2}
frontend: {type: dynamo, enable_multiple_frontends: true, num_additional_frontends: 2}
"""
    p = plan(body, addresses={"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"})
    fronts = [(u.name, u.nodes, u.ports, u.argv[-1]) for u in p.units if u.phase == "frontend"]
    # replicas round-robin over the worker nodes other than the head; ports count up per node
    assert fronts == [
        ("frontend_0", ("node2",), {"http": 8180}, "--http-port=8180"),
        ("frontend_1", ("node3",), {"http": 8180}, "--http-port=8180"),
        ("frontend_2", ("node2",), {"http": 8181}, "--http-port=8181"),
        ("nginx", ("node1",), {"http": 8000}, "daemon off;"),
    ]
    assert p.gate == "nginx"
    nginx = p.unit("nginx")
    assert nginx.argv == ("nginx", "-c", "/logs/nginx.conf", "-g", "daemon off;")
    assert nginx.srun.shell is False
    assert nginx.srun.options == {}  # --container-remap-root comes from the container, once
    assert nginx.container is not None
    assert (nginx.container.image, nginx.container.remap_root) == ("nginx:1.27.4", True)
    # nginx carries the gate: Dynamo's /health through the public port
    assert nginx.readiness is not None
    assert isinstance(nginx.readiness.probe, WorkerCountProbe)
    assert (nginx.readiness.probe.node, nginx.readiness.probe.port, nginx.readiness.probe.path) == (
        "node1",
        8000,
        "/health",
    )
    assert (nginx.readiness.probe.expect_prefill, nginx.readiness.probe.expect_decode) == (1, 2)
    assert p.unit("frontend_2").readiness is not None
    assert p.unit("frontend_2").readiness.probe == TcpProbe(node="node2", port=8181)
    conf = p.files["outputs/local/logs/nginx.conf"]
    assert (
        "    upstream frontends {\n        least_conn;\n"
        "        server 10.0.0.2:8180 max_fails=0;\n"
        "        server 10.0.0.3:8180 max_fails=0;\n"
        "        server 10.0.0.2:8181 max_fails=0;\n"
        "        keepalive 1024;\n    }\n"
    ) in conf
    assert "        listen 8000;\n" in conf


def test_replicas_in_local_mode_share_one_port_space() -> None:
    body = """\
engine: {type: toy}
roles:
  agg: {nodes: 2, workers: 2}
frontend: {type: toy-router, enable_multiple_frontends: true, num_additional_frontends: 1}
"""
    p = plan(body, local=True)
    assert [(u.name, u.ports["http"]) for u in p.units if u.phase == "frontend"] == [
        ("frontend_0", 8180),
        ("frontend_1", 8181),
        ("nginx", 8000),
    ]


# --------------------------------------------------------------------------- teardown, sbatch


def test_teardown_budget_is_the_sum_over_tiers_of_the_slowest() -> None:
    body = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: dynamo, enable_multiple_frontends: false}
benchmark: {type: custom, command: "true"}
services:
  - {name: m, type: mooncake-master}
"""
    p = plan(body)
    tiers = {u.name: (u.tier, u.terminate_timeout) for u in p.units}
    assert tiers == {
        "service_etcd": (2, 30.0),
        "service_m": (1, 30.0),
        "agg_0_node1": (0, 30.0),
        "frontend_0": (0, 20.0),
        "benchmark": (0, 15.0),
    }
    assert p.teardown.tiers == {"0": 30.0, "1": 30.0, "2": 30.0}
    assert p.teardown.total_seconds == 90.0
    assert p.teardown.early_warning_seconds == 150  # the budget plus a minute
    assert p.teardown.fits is True
    assert p.sbatch is not None
    assert p.sbatch.signal == "B:USR1@150"
    short = plan(body, Cluster(early_warning_seconds=60, kill_wait_seconds=45))
    assert (short.teardown.early_warning_seconds, short.teardown.fits) == (60, False)
    assert short.teardown.kill_wait_seconds == 45.0
    assert short.sbatch is not None
    assert short.sbatch.signal == "B:USR1@60"
    assert short.warnings[-1] == (
        "teardown needs up to 90 s but the early warning gives 60 s; raise early_warning_seconds in the "
        "cluster settings"
    )
    local = plan(body, local=True)
    assert (local.teardown.early_warning_seconds, local.teardown.fits, local.sbatch) == (0, True, None)


SBATCH_BODY = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
sbatch_directives: {comment: "two words", exclusive: "", mail-type: "END,FAIL"}
slurm: {partition: batch}
"""


def test_sbatch_values_and_the_exec_line_are_shell_quoted() -> None:
    head = HEAD.replace("name: t\n", 'name: "my job\'s $HOME"\n')
    p = plan(SBATCH_BODY, Cluster(default_account="acct 1", default_time_limit="00:30:00"), head=head)
    script = sbatch_script(p, ["/recipes dir/r.yaml", "--variant", "a$b"])
    assert script == (
        "#!/bin/bash\n"
        "#SBATCH --job-name='my job'\"'\"'s $HOME'\n"
        "#SBATCH --nodes=1\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --gpus-per-node=8\n"
        "#SBATCH --account='acct 1'\n"
        "#SBATCH --partition=batch\n"
        "#SBATCH --time=00:30:00\n"
        "#SBATCH --signal=B:USR1@90\n"
        "#SBATCH --comment='two words'\n"
        "#SBATCH --exclusive\n"
        "#SBATCH --mail-type=END,FAIL\n"
        "\n"
        "# srtd stops the job tier by tier on SIGUSR1, 90 s before the time limit;\n"
        "# its teardown budget is 30 s (KillWait 30 s).\n"
        "set -eu\n"
        "exec srtd run '/recipes dir/r.yaml' --variant 'a$b'\n"
    )


def test_a_newline_in_an_sbatch_value_is_a_plan_error() -> None:
    # The job name names files too, so a newline in it is refused at load, with its line.
    head = HEAD.replace("name: t\n", 'name: "a\\nb"\n')
    with pytest.raises(RecipeError, match=r"^r.yaml:2:7 name: names a log file, so it may not hold"):
        plan(SBATCH_BODY, head=head)
    body = SBATCH_BODY.replace('comment: "two words"', 'comment: "x\\n#SBATCH --uid=0"')
    with pytest.raises(PlanError) as info:
        sbatch_script(plan(body), ["r.yaml"])
    assert str(info.value) == "#SBATCH --comment must be one line, got 'x\\n#SBATCH --uid=0'"


def test_a_local_plan_has_no_sbatch_script() -> None:
    with pytest.raises(PlanError, match="a local plan has no sbatch script; plan without --local"):
        sbatch_script(plan(SBATCH_BODY, local=True), ["r.yaml"])


def test_sbatch_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tmp_path / "my recipes" / "r $x.yaml"
    recipe.parent.mkdir()
    recipe.write_text(HEAD.replace("name: t\n", 'name: "job $USER"\n') + SBATCH_BODY)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["plan", str(recipe), "--sbatch"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "#SBATCH --job-name='job $USER'"
    # the srtd that rendered it, so the batch job runs the same srtd
    assert lines[-1] == f"exec {shlex.join(srtd_command())} run '{recipe}'"
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD.replace("name: t\n", 'name: "a\\nb"\n') + SBATCH_BODY)
    result = CliRunner().invoke(cli, ["plan", str(bad), "--sbatch"])
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"srtd: {bad}:2:7 name: names a log file, so it may not hold `/`, `..` or control characters, got 'a\\nb'\n"
    )
    # validate refuses the same, at the same key
    result = CliRunner().invoke(cli, ["validate", str(bad)])
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"{bad}:2:7 name: names a log file, so it may not hold `/`, `..` or control characters, got 'a\\nb'\n"
    )
