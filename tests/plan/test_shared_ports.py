"""Nodes on one host share a port space: per-node port kinds then never repeat across nodes."""

from __future__ import annotations

from pathlib import Path

from srtd.cluster import Cluster
from srtd.plan import build_plan
from srtd.recipe import load_recipe

DEMO = Path(__file__).resolve().parents[2] / "recipes" / "slurm-dev" / "demo.yaml"


def worker_ports(shared: bool, cluster: Cluster | None = None) -> list[int]:
    plan = build_plan(load_recipe(DEMO), cluster, nodes=["node1", "node2"], shared_ports=shared)
    return [u.ports["http"] for u in plan.units if u.kind.value == "worker"]


def test_per_node_ports_restart_on_each_node_by_default() -> None:
    assert worker_ports(False) == [6100, 6100, 6132]


def test_one_port_space_when_the_nodes_share_a_host() -> None:
    assert worker_ports(True) == [6100, 6132, 6164]
    assert worker_ports(False, Cluster(shared_port_space=True)) == [6100, 6132, 6164]
