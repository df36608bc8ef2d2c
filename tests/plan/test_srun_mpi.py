"""`srun_mpi` in the cluster settings replaces the MPI plugin rows ask srun for."""

from __future__ import annotations

from pathlib import Path

from srtd.cluster import Cluster
from srtd.launch import srun_argv
from srtd.plan import build_plan
from srtd.recipe import load_recipe

AGG = Path(__file__).resolve().parents[2] / "recipes" / "slurm-dev" / "dynamo-agg.yaml"
NODES = ["node1", "node2", "node3"]


def mpi_by_unit(cluster: Cluster | None) -> dict[str, str | None]:
    plan = build_plan(load_recipe(AGG), cluster, nodes=NODES)
    return {u.name: u.srun.mpi for u in plan.units}


def test_rows_keep_their_plugin_by_default() -> None:
    assert mpi_by_unit(None) == {
        "service_etcd": None,
        "agg_0_node2": None,
        "agg_1_node3": None,
        "frontend_0": "pmix",  # srtctl's shape for the Dynamo frontend
        "benchmark": None,
    }


def test_the_cluster_setting_replaces_it_only_where_one_is_asked_for() -> None:
    assert mpi_by_unit(Cluster(srun_mpi="none")) == {
        "service_etcd": None,
        "agg_0_node2": None,
        "agg_1_node3": None,
        "frontend_0": "none",
        "benchmark": None,
    }
    plan = build_plan(load_recipe(AGG), Cluster(srun_mpi="pmi2"), nodes=NODES)
    frontend = next(u for u in plan.units if u.name == "frontend_0")
    argv = srun_argv(frontend, job_id="7", attempt=0, log_path="f.out", record=None)
    assert "--mpi=pmi2" in argv
    assert not any(a == "--mpi=pmix" for a in argv)
