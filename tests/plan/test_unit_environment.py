"""What a unit's command and mounts promise about its environment (docs/recipe.md).

- A custom benchmark runs under a login shell only in a container (the image's profile,
  as srtctl); on a host under `bash -c`, with srtd's own environment.
- `$SRTCTL_SOURCE_DIR` in a mount is the directory srtd runs in (or the value srtd's
  environment gives it): upstream's torchrun-pool example mounts a real directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.plan import build_plan
from srtd.recipe import load_recipes
from srtd.unit import Plan, Unit
from tests.plan._util import plan
from tests.reference import CORPUS, need_shared

CUSTOM = """\
engine: sglang
roles: {agg: {nodes: 1, workers: 1}}
frontend: {type: sglang-router, enable_multiple_frontends: false}
benchmark: {type: custom, command: 'only-in-venv --flag "$SRTD_LOG_DIR"'}
"""
TORCHRUN_POOL = "srt-slurm/examples/features/torchrun-pool.yaml"
NODES = ["n1", "n2", "n3"]


def unit(p: Plan, name: str) -> Unit:
    return next(u for u in p.units if u.name == name)


def test_a_custom_benchmark_runs_under_bash_c_on_a_host() -> None:
    for p in (plan(CUSTOM, local=True), plan(CUSTOM, Cluster(container_runtime="none"), nodes=NODES)):
        assert unit(p, "benchmark").container is None
        assert unit(p, "benchmark").argv == ("bash", "-c", 'only-in-venv --flag "$SRTD_LOG_DIR"')


def test_a_custom_benchmark_runs_under_a_login_shell_in_its_container_as_srtctl() -> None:
    bench = unit(plan(CUSTOM, nodes=NODES), "benchmark")
    assert bench.container is not None
    assert bench.container.image == "img.sqsh"
    assert bench.argv == ("bash", "-lc", 'only-in-venv --flag "$SRTD_LOG_DIR"')


def torchrun_pool_mounts() -> dict[str, str]:
    need_shared()
    loaded = load_recipes(CORPUS / TORCHRUN_POOL)[0]
    p = build_plan(loaded, Cluster(), nodes=NODES)
    mounts = {u.name: u.container.mounts for u in p.units if u.container is not None}
    assert list(mounts) == ["service_train_n1", "service_train_n2", "benchmark"]
    assert mounts["service_train_n1"] == mounts["service_train_n2"] == mounts["benchmark"]  # every container's
    return dict(mounts["service_train_n1"])


def test_upstreams_torchrun_pool_mounts_its_demo_from_the_directory_srtd_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = tmp_path / "examples" / "features" / "torchrun-pool"
    demo.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SRTCTL_SOURCE_DIR", raising=False)
    mounts = torchrun_pool_mounts()
    assert {host: inside for host, inside in mounts.items() if inside == "/demo"} == {str(demo): "/demo"}
    assert not any("SRTCTL_SOURCE_DIR" in host for host in mounts)


def test_a_source_dir_in_srtds_environment_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SRTCTL_SOURCE_DIR", "/shared/srt-slurm")
    mounts = torchrun_pool_mounts()
    assert mounts["/shared/srt-slurm/examples/features/torchrun-pool"] == "/demo"
