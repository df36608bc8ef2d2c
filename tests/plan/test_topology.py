"""Topology facts computed by hand: which node does what, which GPUs a worker gets, its ports.

The rules are srt-slurm's (srtctl-behaviour.md §5): reserved nodes first, then the roles'
nodes in role order, then the pools in `services:` order; workers packed at the next GPU
offset; ports from the PortKind table.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import srtd.cli._commands  # noqa: F401
from srtd.cli._main import cli
from srtd.cluster import Cluster
from srtd.errors import PlanError
from srtd.topology import (
    HTTP,
    PORT_KINDS,
    SYS,
    VLLM_SCAN,
    NodeNeeds,
    PortAllocator,
    carve,
    place_role,
)
from srtd.unit import Plan
from tests.plan._util import names, plan, plan_error

# --------------------------------------------------------------------------- carving


def test_no_dedicated_roles_head_infra_and_client_share_the_first_node() -> None:
    nodes = carve(NodeNeeds(roles={"prefill": 1, "decode": 2}), None)
    assert nodes.allocation == ("node1", "node2", "node3")
    assert (nodes.head, nodes.infra, nodes.benchmark) == ("node1", "node1", "node1")
    assert nodes.roles == {"prefill": ("node1",), "decode": ("node2", "node3")}
    assert nodes.reserved == ()
    assert nodes.unused == ()


def test_dedicated_infra_alone_takes_the_first_node() -> None:
    nodes = carve(NodeNeeds(roles={"agg": 2}, dedicated=frozenset({"infra"})), None)
    assert nodes.allocation == ("node1", "node2", "node3")
    assert nodes.reserved == ("node1",)
    assert nodes.infra == "node1"
    assert nodes.roles == {"agg": ("node2", "node3")}
    assert (nodes.head, nodes.benchmark) == ("node2", "node2")  # head = first worker node


def test_dedicated_frontend_and_infra_colocated_share_the_first_node() -> None:
    nodes = carve(NodeNeeds(roles={"agg": 1}, dedicated=frozenset({"infra", "frontend"})), None)
    assert nodes.reserved == ("node1",)
    assert (nodes.head, nodes.infra, nodes.benchmark) == ("node1", "node1", "node1")
    assert nodes.roles == {"agg": ("node2",)}


def test_colocated_reservation_with_the_client_is_the_last_node() -> None:
    # The first node runs the batch script unsandboxed; the client is kept off it.
    needs = NodeNeeds(roles={"prefill": 1, "decode": 1}, dedicated=frozenset({"infra", "frontend", "client"}))
    assert needs.total == 3
    nodes = carve(needs, ["a", "b", "c"])
    assert nodes.reserved == ("c",)
    assert (nodes.head, nodes.infra, nodes.benchmark) == ("c", "c", "c")
    assert nodes.roles == {"prefill": ("a",), "decode": ("b",)}


def test_client_alone_colocated_is_the_last_node() -> None:
    nodes = carve(NodeNeeds(roles={"agg": 2}, dedicated=frozenset({"client"})), ["a", "b", "c"])
    assert nodes.reserved == ("c",)
    assert (nodes.head, nodes.infra, nodes.benchmark) == ("a", "a", "c")
    assert nodes.roles == {"agg": ("a", "b")}


def test_without_colocation_infra_and_frontend_from_the_front_client_from_the_back() -> None:
    needs = NodeNeeds(
        roles={"prefill": 1, "decode": 1},
        dedicated=frozenset({"client", "frontend", "infra"}),
        colocate_dedicated=False,
    )
    assert needs.reserved == 3
    nodes = carve(needs, ["a", "b", "c", "d", "e"])
    assert (nodes.infra, nodes.head, nodes.benchmark) == ("a", "b", "e")
    assert nodes.reserved == ("a", "b", "e")
    assert nodes.roles == {"prefill": ("c",), "decode": ("d",)}


def test_pools_come_after_the_roles_in_services_order() -> None:
    needs = NodeNeeds(roles={"prefill": 1, "decode": 1}, pools=(("train", 2), ("eval", 1)))
    nodes = carve(needs, None)
    assert nodes.roles == {"prefill": ("node1",), "decode": ("node2",)}
    assert nodes.pools == {"train": ("node3", "node4"), "eval": ("node5",)}
    assert nodes.workers == ("node1", "node2")
    assert nodes.compute == ("node1", "node2", "node3", "node4", "node5")
    assert nodes.head == "node1"


def test_services_only_job_head_is_the_first_pool_node() -> None:
    nodes = carve(NodeNeeds(roles={}, pools=(("train", 2),)), None)
    assert nodes.pools == {"train": ("node1", "node2")}
    assert (nodes.head, nodes.infra, nodes.benchmark) == ("node1", "node1", "node1")
    assert nodes.workers == ()
    # with a dedicated infra node in front of it
    nodes = carve(NodeNeeds(roles={}, pools=(("train", 2),), dedicated=frozenset({"infra"})), None)
    assert nodes.reserved == ("node1",)
    assert nodes.pools == {"train": ("node2", "node3")}
    assert (nodes.head, nodes.infra) == ("node2", "node1")


def test_services_only_recipe_head_is_the_first_pool_node() -> None:
    p = plan(
        """\
        frontend: {type: none}
        services:
          - name: train
            nodes: 2
            terminal: true
            command: [torchrun, "--master-addr={pool_ip}", "--node-rank={index}"]
        """
    )
    assert p.nodes == {
        "head": ("node1",),
        "infra": ("node1",),
        "benchmark": ("node1",),
        "pool:train": ("node1", "node2"),
    }
    assert names(p) == ["service_train_node1", "service_train_node2"]
    assert [u.argv for u in p.units] == [
        ("torchrun", "--master-addr=node1", "--node-rank=0"),
        ("torchrun", "--master-addr=node1", "--node-rank=1"),
    ]


def test_a_job_without_roles_or_pools_runs_its_services_on_one_head_node() -> None:
    p = plan(
        """\
        frontend: {type: none}
        services:
          - {name: hello, command: [echo, "{head_node}"], terminal: true}
        """,
        nodes=["a1", "a2"],
    )
    assert p.nodes == {"head": ("a1",), "infra": ("a1",), "benchmark": ("a1",), "unused": ("a2",)}
    assert [(u.name, u.nodes, u.argv) for u in p.units] == [("service_hello", ("a1",), ("echo", "a1"))]
    assert p.sbatch is not None
    assert p.sbatch.nodes == 1


def test_short_allocation_names_what_is_needed() -> None:
    needs = NodeNeeds(roles={"prefill": 1, "decode": 2}, pools=(("train", 1),), dedicated=frozenset({"infra"}))
    with pytest.raises(PlanError) as info:
        carve(needs, ["a", "b", "c"])
    assert (
        str(info.value) == "the recipe needs 5 nodes (prefill 1, decode 2, pool train 1, dedicated 1), allocation has 3"
    )


def test_short_allocation_through_build_plan() -> None:
    body = """\
    engine: sglang
    roles:
      prefill: {nodes: 1, workers: 1}
      decode: {nodes: 2, workers: 2}
    frontend: {type: sglang-router, enable_multiple_frontends: false}
    """
    assert plan_error(body, nodes=["gpu-1", "gpu-2"]) == (
        "the recipe needs 3 nodes (prefill 1, decode 2), allocation has 2"
    )


def test_a_node_named_twice_is_refused() -> None:
    with pytest.raises(PlanError, match=r"^the node list names a twice$"):
        carve(NodeNeeds(roles={"agg": 1}), ["a", "a"])


def test_host_list_with_extra_nodes_leaves_them_unused(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    result = CliRunner().invoke(cli, ["plan", "recipes/sglang/router-agg.yaml", "--json", "--nodes", "gpu-[01-04]"])
    assert result.exit_code == 0, result.output
    p = Plan.loads(result.stdout)
    assert p.allocation == ("gpu-01", "gpu-02", "gpu-03", "gpu-04")
    assert p.nodes["agg"] == ("gpu-01",)
    assert p.nodes["unused"] == ("gpu-02", "gpu-03", "gpu-04")
    assert p.sbatch is not None
    assert p.sbatch.nodes == 1
    assert {n for u in p.units for n in u.nodes} == {"gpu-01"}


def test_recipe_with_dedicated_etcd_and_nats_reserves_one_node() -> None:
    body = """\
    engine: vllm
    roles:
      agg: {nodes: 1, workers: 1}
    frontend: {type: dynamo, enable_multiple_frontends: false}
    dynamo: {request_plane: nats}
    services:
      - {name: etcd, type: etcd, placement: {node: dedicated}}
      - {name: nats, type: nats, placement: {node: dedicated}}
    """
    p = plan(body)
    assert p.nodes == {
        "head": ("node2",),
        "infra": ("node1",),
        "benchmark": ("node2",),
        "reserved": ("node1",),
        "agg": ("node2",),
    }
    assert [(u.name, u.nodes) for u in p.units[:2]] == [("service_etcd", ("node1",)), ("service_nats", ("node1",))]
    assert p.unit("agg_0_node2").env["ETCD_ENDPOINTS"] == "http://node1:2379"
    assert p.unit("agg_0_node2").env["NATS_SERVER"] == "nats://node1:4222"


def test_recipe_frontend_and_client_dedicated_with_and_without_colocation() -> None:
    body = """\
    engine: sglang
    roles:
      agg: {{nodes: 1, workers: 1}}
    frontend: {{type: sglang-router, enable_multiple_frontends: false, placement: {{node: dedicated}}}}
    benchmark: {{type: sa-bench, isl: 8, osl: 8, concurrencies: [1], placement: {{node: dedicated}},
                colocate_with_frontend: {colocate}}}
    """
    together = plan(body.format(colocate="true"))
    assert together.nodes == {
        "head": ("node2",),
        "infra": ("node2",),
        "benchmark": ("node2",),
        "reserved": ("node2",),
        "agg": ("node1",),
    }
    assert together.unit("frontend_0").nodes == ("node2",)
    assert together.unit("benchmark").nodes == ("node2",)
    apart = plan(body.format(colocate="false"))
    assert apart.nodes == {
        "head": ("node1",),
        "infra": ("node1",),
        "benchmark": ("node3",),
        "reserved": ("node1", "node3"),
        "agg": ("node2",),
    }
    assert apart.unit("frontend_0").nodes == ("node1",)
    assert apart.unit("benchmark").nodes == ("node3",)
    assert apart.sbatch is not None
    assert apart.sbatch.nodes == 3


def test_manual_benchmark_reserves_no_client_node() -> None:
    body = """\
    engine: sglang
    roles:
      agg: {nodes: 1, workers: 1}
    frontend: {type: sglang-router, enable_multiple_frontends: false}
    benchmark: {type: manual, placement: {node: dedicated}}
    """
    assert plan(body).allocation == ("node1",)


# --------------------------------------------------------------------------- GPUs


def test_decode_colocates_after_prefill_gpus() -> None:
    p = plan(
        """\
        engine: sglang
        roles:
          prefill: {nodes: 1, workers: 4, gpus: 1}
          decode: {nodes: colocate, workers: 2, gpus: 2}
        frontend: {type: sglang-router, enable_multiple_frontends: false}
        """
    )
    assert p.allocation == ("node1",)
    workers = [(u.name, u.gpus, u.env["CUDA_VISIBLE_DEVICES"]) for u in p.units if u.role in ("prefill", "decode")]
    assert workers == [
        ("prefill_0_node1", (0,), "0"),
        ("prefill_1_node1", (1,), "1"),
        ("prefill_2_node1", (2,), "2"),
        ("prefill_3_node1", (3,), "3"),
        ("decode_0_node1", (4, 5), "4,5"),
        ("decode_1_node1", (6, 7), "6,7"),
    ]


def test_partial_workers_are_packed() -> None:
    endpoints, end = place_role("agg", 4, 2, ("n1",), 8)
    assert [(e.nodes, e.gpus) for e in endpoints] == [
        (("n1",), (0, 1)),
        (("n1",), (2, 3)),
        (("n1",), (4, 5)),
        (("n1",), (6, 7)),
    ]
    assert all(e.partial for e in endpoints)
    assert (end.node, end.offset) == (0, 8)


def test_a_worker_that_does_not_fit_moves_to_the_next_node() -> None:
    endpoints, _ = place_role("agg", 3, 3, ("n1", "n2"), 8)
    assert [(e.nodes, e.gpus) for e in endpoints] == [
        (("n1",), (0, 1, 2)),
        (("n1",), (3, 4, 5)),
        (("n2",), (0, 1, 2)),
    ]
    p = plan(
        """\
        engine: sglang
        roles:
          agg: {workers: 3, gpus: 3}
        frontend: {type: sglang-router, enable_multiple_frontends: false}
        """
    )
    assert p.nodes["agg"] == ("node1", "node2")  # ceil(3 * 3 / 8)
    assert [(u.name, u.gpus) for u in p.units if u.role == "agg"] == [
        ("agg_0_node1", (0, 1, 2)),
        ("agg_1_node1", (3, 4, 5)),
        ("agg_2_node2", (0, 1, 2)),
    ]


def test_spread_workers_gives_each_worker_a_fresh_node() -> None:
    endpoints, _ = place_role("agg", 2, 2, ("n1", "n2"), 8, spread=True)
    assert [(e.nodes, e.gpus) for e in endpoints] == [(("n1",), (0, 1)), (("n2",), (0, 1))]
    head = "schema: 2\nname: t\nmodel: {path: /m, container: c.sqsh, precision: bf16}\n"
    head += "resources: {gpus_per_node: 8, spread_workers: true}\n"
    head += "observability: {tachometer: {enabled: false}}\n"
    p = plan(
        """\
        engine: sglang
        roles:
          agg: {workers: 2, gpus: 2}
        frontend: {type: sglang-router, enable_multiple_frontends: false}
        """,
        head=head,
    )
    assert p.allocation == ("node1", "node2")
    assert [(u.name, u.gpus) for u in p.units if u.role == "agg"] == [("agg_0_node1", (0, 1)), ("agg_1_node2", (0, 1))]


def test_too_many_workers_for_the_role_nodes() -> None:
    with pytest.raises(PlanError) as info:
        place_role("agg", 3, 4, ("n1",), 8)
    assert str(info.value) == "3 worker(s) of 4 GPU(s) do not fit on 1 node(s) of 8 GPUs"
    assert info.value.problems[0].path == "roles.agg.workers"
    body = """\
    engine: sglang
    roles:
      agg: {nodes: 1, workers: 3, gpus: 4}
    frontend: {type: sglang-router, enable_multiple_frontends: false}
    """
    assert plan_error(body) == "3 worker(s) of 4 GPU(s) do not fit on 1 node(s) of 8 GPUs"


def test_a_sixteen_gpu_worker_spans_two_nodes() -> None:
    endpoints, _ = place_role("prefill", 1, 16, ("n1", "n2", "n3"), 8)
    assert [(e.nodes, e.gpus, e.partial, e.gpu_count) for e in endpoints] == [
        (("n1", "n2"), tuple(range(8)), False, 16)
    ]
    p = plan(
        """\
        engine: sglang
        roles:
          prefill: {nodes: 2, workers: 1, gpus: 16}
          decode: {nodes: 1, workers: 1}
        frontend: {type: sglang-router, enable_multiple_frontends: false}
        """
    )
    assert p.nodes["prefill"] == ("node1", "node2")
    a, b = p.unit("prefill_0_node1"), p.unit("prefill_0_node2")
    assert (a.group, b.group) == ("prefill_0", "prefill_0")
    assert (a.gpus, b.gpus) == ((), ())
    assert "CUDA_VISIBLE_DEVICES" not in a.env
    assert "CUDA_VISIBLE_DEVICES" not in b.env
    assert a.argv[a.argv.index("--dist-init-addr") :][:6] == (
        "--dist-init-addr",
        "node1:8300",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
    )
    assert b.argv[b.argv.index("--dist-init-addr") :][:6] == (
        "--dist-init-addr",
        "node1:8300",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
    )
    # only the leader serves HTTP and the bootstrap port; the follower is not probed
    assert "http" in a.ports
    assert "bootstrap" in a.ports
    assert "http" not in b.ports
    assert "bootstrap" not in b.ports
    assert a.readiness is not None
    assert b.readiness is None
    # the frontend waits for both processes of the worker to be started
    assert ("prefill_0_node2", "started") in [(e.unit, e.condition.value) for e in p.unit("frontend_0").after]


def test_visible_devices_variable_is_the_clusters_and_only_on_partial_workers() -> None:
    body = """\
    engine: sglang
    roles:
      prefill: {nodes: 1, workers: 2, gpus: 4}
      decode: {nodes: 1, workers: 1, gpus: 8}
    frontend: {type: sglang-router, enable_multiple_frontends: false}
    """
    p = plan(body, Cluster(visible_devices_env="ROCR_VISIBLE_DEVICES"))
    env = {u.name: u.env for u in p.units if u.role in ("prefill", "decode")}
    assert env["prefill_0_node1"]["ROCR_VISIBLE_DEVICES"] == "0,1,2,3"
    assert env["prefill_1_node1"]["ROCR_VISIBLE_DEVICES"] == "4,5,6,7"
    assert "ROCR_VISIBLE_DEVICES" not in env["decode_0_node2"]
    assert not any("CUDA_VISIBLE_DEVICES" in e for e in env.values())


def test_gpus_per_node_of_the_recipe_wins_over_the_cluster() -> None:
    body = """\
    engine: sglang
    roles:
      agg: {nodes: 1, workers: 2}
    frontend: {type: sglang-router, enable_multiple_frontends: false}
    """
    p = plan(body, Cluster(gpus_per_node=4))
    assert [u.gpus for u in p.units if u.role == "agg"] == [(0, 1, 2, 3), (4, 5, 6, 7)]


# --------------------------------------------------------------------------- ports


def test_the_port_kind_table() -> None:
    rows = {n: (k.base, k.stride, k.per_node, k.span) for n, k in PORT_KINDS.items()}
    assert rows == {
        "sys": (7500, 1, False, 1),
        "http": (6100, 32, True, 1),
        "bootstrap": (7200, 1, True, 1),
        "kv_events": (5200, 1, False, 1),
        "nixl": (5400, 1, False, 1),
        "dp_rpc": (8400, 1, True, 1),
        "kvbm_zmq": (5600, 2, False, 2),
        "sidecar_grpc": (50051, 1, False, 1),
        "nccl": (17500, 1, False, 1),
        "dist_init": (8300, 1, True, 1),
        "vllm_scan": (20000, 50, False, 50),
        "moriio_handshake": (26000, 1, False, 1),
        "moriio_notify": (27000, 1, False, 1),
        "trtllm_dist_init": (29500, 1, False, 1),
        "grpc": (10000, 1, True, 1),
        "load_publish": (18000, 1, False, 1),
        "kv_replay": (19000, 1, False, 1),
    }


SGLANG_2P_1D = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 2, gpus: 4}
  decode: {nodes: 2, workers: 2, gpus: 8}
frontend: {type: dynamo, enable_multiple_frontends: false}
"""


def test_worker_ports_from_the_table() -> None:
    p = plan(SGLANG_2P_1D)
    ports = {u.name: u.ports for u in p.units if u.role in ("prefill", "decode")}
    assert ports == {
        # sys, kv_events, nixl, nccl: one counter for the job; http, dist_init, bootstrap: per node
        "prefill_0_node1": {
            "sys": 7500,
            "kv_events": 5200,
            "nixl": 5400,
            "nccl": 17500,
            "dist_init": 8300,
            "http": 6100,
            "bootstrap": 7200,
        },
        "prefill_1_node1": {
            "sys": 7501,
            "kv_events": 5201,
            "nixl": 5401,
            "nccl": 17501,
            "dist_init": 8301,
            "http": 6132,
            "bootstrap": 7201,
        },
        "decode_0_node2": {
            "sys": 7502,
            "kv_events": 5202,
            "nixl": 5402,
            "nccl": 17502,
            "dist_init": 8300,
            "http": 6100,
        },
        "decode_1_node3": {
            "sys": 7503,
            "kv_events": 5203,
            "nixl": 5403,
            "nccl": 17503,
            "dist_init": 8300,
            "http": 6100,
        },
    }
    assert p.unit("prefill_1_node1").env["DYN_SYSTEM_PORT"] == "7501"
    argv = p.unit("prefill_1_node1").argv
    assert argv[argv.index("--port") + 1] == "6132"
    assert argv[argv.index("--nccl-port") + 1] == "17501"
    assert argv[argv.index("--disaggregation-bootstrap-port") + 1] == "7201"


def test_local_mode_shares_one_port_space() -> None:
    p = plan(SGLANG_2P_1D, local=True)
    ports = {
        u.name: (u.ports["http"], u.ports["dist_init"], u.ports["sys"])
        for u in p.units
        if u.role in ("prefill", "decode")
    }
    # per-node kinds keep counting across the (imaginary) nodes
    assert ports == {
        "prefill_0_node1": (6100, 8300, 7500),
        "prefill_1_node1": (6132, 8301, 7501),
        "decode_0_node2": (6164, 8302, 7502),
        "decode_1_node3": (6196, 8303, 7503),
    }
    assert set(p.addresses.values()) == {"127.0.0.1"}


def test_vllm_scan_blocks_are_fifty_apart() -> None:
    p = plan(
        """\
        engine: vllm
        roles:
          agg: {nodes: 2, workers: 3, gpus: 4}
        frontend: {type: vllm-router, enable_multiple_frontends: false}
        """
    )
    env = [(u.name, u.ports["vllm_scan"], u.env["VLLM_PORT"]) for u in p.units if u.role == "agg"]
    assert env == [("agg_0_node1", 20000, "20000"), ("agg_1_node1", 20050, "20050"), ("agg_2_node2", 20100, "20100")]


def test_allocator_rules() -> None:
    ports = PortAllocator()
    with pytest.raises(PlanError) as info:
        ports.next(HTTP)
    assert str(info.value) == "port kind http is allocated per node, but no node was given"
    assert [ports.next(HTTP, "a"), ports.next(HTTP, "a"), ports.next(HTTP, "b")] == [6100, 6132, 6100]
    assert [ports.next(SYS), ports.next(SYS, "b"), ports.next(SYS, size=4), ports.next(SYS)] == [7500, 7501, 7502, 7506]
    local = PortAllocator(local=True)
    assert [local.next(HTTP, "a"), local.next(HTTP, "b")] == [6100, 6132]
    with pytest.raises(PlanError, match="allocated per node"):
        local.next(HTTP)  # a node is still required, even when all nodes are one
    based = PortAllocator(bases={"sys": 9000})
    assert based.next(SYS) == 9000
    full = PortAllocator(bases={"vllm_scan": 65500})
    with pytest.raises(PlanError) as info:
        full.next(VLLM_SCAN)
    assert str(info.value) == "port kind vllm_scan ran out of ports (next would be 65549)"
