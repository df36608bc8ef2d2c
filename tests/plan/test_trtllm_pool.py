"""TensorRT-LLM's own Mooncake pool: the pool master, a donor per decode node, and the workers' side."""

from __future__ import annotations

from srtd.services._mooncake import SCRUB_MPI_ENV
from srtd.unit import FileProbe, TcpProbe
from tests.plan._util import check_problems, plan

POOL = """\
engine: {type: trtllm, served_model_name: m}
frontend: {type: dynamo, enable_multiple_frontends: false}
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
    args:
      kv_connector_config: {connector: mooncake-store, mooncake_store: {protocol: rdma}}
  decode: {nodes: 1, workers: 1, gpus: 1}
services:
  - name: mooncake-master
    type: mooncake-master
    options: {eviction_ratio: 0.05, master_timeout_s: 900, store_role: both}
  - name: donor
    type: mooncake-donor
    placement: {node: decode}
    options: {size: 4GiB}
"""
NODES = ["n1", "n2"]


def test_pool_options_run_trtllms_master_outside_mpi() -> None:
    p = plan(POOL, nodes=NODES, log_dir="/out/logs")
    master = p.unit("service_mooncake-master")
    assert master.argv == (
        *("trtllm-serve", "mooncake_master", "--rpc_port", "8700", "--metrics_port", "8702"),
        *("--eviction_ratio", "0.05", "--address_file", "/logs/mooncake_master.addr"),
    )
    assert master.env["TRTLLM_MOONCAKE_RUN_DIR"] == "/logs/mooncake/master"
    assert master.env["TRTLLM_MOONCAKE_MASTER_TIMEOUT"] == "900"
    assert master.srun.options["mpi"] == "none"
    assert master.preamble is not None
    assert master.preamble.endswith(f"mkdir -p /logs/mooncake/master && {SCRUB_MPI_ENV}")
    assert master.readiness is not None
    assert master.readiness.probe == TcpProbe(node="n1", port=8700)


def test_a_donor_lends_each_decode_node_and_is_ready_by_its_marker_file() -> None:
    p = plan(POOL, nodes=NODES, log_dir="/out/logs")
    donor = p.unit("service_donor")
    assert donor.nodes == ("n2",)
    assert donor.argv == (
        *("trtllm-serve", "mooncake_donor", "--master_server_address", "file:///logs/mooncake_master.addr"),
        *("--segment_size", "4GiB", "--protocol", "rdma", "--ready_file", "/logs/mooncake/donor-n2.ready"),
    )
    wanted = ("TRTLLM_MOONCAKE_RUN_DIR", "TLLM_LOG_LEVEL", "TRTLLM_MOONCAKE_MASTER_TIMEOUT")
    assert {k: donor.env[k] for k in wanted} == {
        "TRTLLM_MOONCAKE_RUN_DIR": "/logs/mooncake/donor-n2",
        "TLLM_LOG_LEVEL": "INFO",
        "TRTLLM_MOONCAKE_MASTER_TIMEOUT": "900",
    }
    assert donor.srun.options["mpi"] == "none"
    assert donor.preamble is not None
    assert "rm -f /logs/mooncake/donor-n2.ready && mkdir -p" in donor.preamble
    assert donor.readiness is not None
    assert donor.readiness.probe == FileProbe(node="n2", path="/out/logs/mooncake/donor-n2.ready")
    assert donor.readiness.timeout_seconds == 900


def test_workers_join_the_pool_and_the_storing_role_provisions_it() -> None:
    p = plan(POOL, nodes=NODES, log_dir="/out/logs")
    prefill, decode = p.unit("prefill_0_n1"), p.unit("decode_0_n2")
    assert prefill.env["TRTLLM_MOONCAKE_MASTER_TIMEOUT"] == decode.env["TRTLLM_MOONCAKE_MASTER_TIMEOUT"] == "900"
    assert prefill.env["TRTLLM_MOONCAKE_STORE_ROLE"] == "both"
    assert "TRTLLM_MOONCAKE_STORE_ROLE" not in decode.env  # decode has no store connector
    assert "MOONCAKE_MASTER" not in prefill.env  # members read the address file
    assert prefill.preamble is not None
    assert prefill.preamble.startswith(
        'export TRTLLM_MOONCAKE_RUN_DIR=/logs/mooncake/prefill-0; mkdir -p "$TRTLLM_MOONCAKE_RUN_DIR"'
    )
    # dynamo.trtllm starts inside the pool TRT-LLM provisions from the role's connector config
    assert prefill.argv[1:3] == ("python3", "-c")
    assert "maybe_provision_pool" in prefill.argv[3]
    assert prefill.argv[4] == "/logs/trtllm_config_prefill.yaml"
    assert decode.argv[1:4] == ("python3", "-m", "dynamo.trtllm")


def test_without_pool_options_the_master_is_mooncakes_own() -> None:
    body = POOL.replace("options: {eviction_ratio: 0.05, master_timeout_s: 900, store_role: both}", "options: {}")
    body = body[: body.index("  - name: donor")]
    p = plan(body, nodes=NODES)
    assert p.unit("service_mooncake-master").argv[0] == "mooncake_master"
    assert "TRTLLM_MOONCAKE_MASTER_TIMEOUT" not in p.unit("prefill_0_n1").env
    assert p.unit("prefill_0_n1").env["MOONCAKE_MASTER"] == "n1:8700"


def test_bad_pool_options_are_named() -> None:
    bad = POOL.replace("eviction_ratio: 0.05", "eviction_ratio: 2").replace("options: {size: 4GiB}", "options: {}")
    assert check_problems(bad) == [
        (19, "services.0.options.eviction_ratio", "must be a number between 0 and 1, got 2"),
        (23, "services.1.options.size", "a mooncake-donor needs options.size (the memory it lends, e.g. 640GiB)"),
    ]
