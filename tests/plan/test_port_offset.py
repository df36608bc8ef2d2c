"""The port offset moves every port srtd chooses, and only those, consistently.

For every recipe under recipes/ (and the corpus, where it is present), the plan with
offset D must be the plan with offset 0 with each of srtd's ports P turned into P + D:
in `ports`, in probes, in argv, env and generated files.  A port left behind at one
site (a discovery URL still naming 2379 while etcd listens on 2389) fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from srtd.cluster import Cluster
from srtd.engines import MORIIO_DISCOVERY_PORT
from srtd.errors import PlanError
from srtd.plan import build_plan
from srtd.recipe import LoadedRecipe, load_recipes
from srtd.topology import ROUTER_METRICS_PORT
from tests.plan._util import plan, plan_error

ROOT = Path(__file__).resolve().parents[2]
OFFSET = 3  # odd and small: a port moved by it cannot be mistaken for another allocation
# srtd's fixed ports that no unit lists in `ports` (a router's metrics, a discovery listener, a master's side ports)
# and the planes srtd advertises even when the job runs none (etcd's 2379).
UNLISTED = {ROUTER_METRICS_PORT, MORIIO_DISCOVERY_PORT, 2379, 2380, 4222, 8701, 8702, 8751, 9101, 9256, 9401}
# Ports a recipe writes into a command of its own stay as written (docs/topology.md).
RECIPE_WRITTEN = {"custom/http-server.yaml": "$SRT_WORKER_NODES:6100/", "services/external-etcd.yaml": ":2379"}
AGG = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: dynamo, enable_multiple_frontends: false}
"""
NUMBER = re.compile(r"(?<![\d.])\d{4,5}(?![\d.])")


def _recipes() -> list[LoadedRecipe]:
    return [r for path in sorted((ROOT / "recipes").rglob("*.yaml")) for r in load_recipes(path)]


def _moved(data: Any, ports: set[int], kept: str | None) -> Any:
    """`data` with every port of `ports` moved by OFFSET, wherever it is written."""
    if isinstance(data, dict):
        return {_moved(k, ports, kept): _moved(v, ports, kept) for k, v in data.items()}
    if isinstance(data, list):
        return [_moved(v, ports, kept) for v in data]
    if isinstance(data, bool):
        return data
    if isinstance(data, int):
        return data + OFFSET if data in ports else data
    if isinstance(data, str):
        if kept is not None and kept in data:
            return data
        return NUMBER.sub(lambda m: str(int(m[0]) + OFFSET) if int(m[0]) in ports else m[0], data)
    return data


def _check(loaded: LoadedRecipe, local: bool) -> None:
    base = build_plan(loaded, Cluster(), local=local, job_id="7")
    moved = build_plan(loaded, Cluster(), local=local, job_id="7", port_offset=OFFSET)
    assert moved.port_offset == OFFSET
    ports = set(UNLISTED)
    for old, new in zip(base.units, moved.units, strict=True):
        for name, port in old.ports.items():
            # srtd's port moves; a port the recipe writes (options.port, readiness.port) stays
            assert new.ports[name] in (port + OFFSET, port), (loaded.file, old.name, name)
            if new.ports[name] != port:
                ports.add(port)
    kept = next((text for name, text in RECIPE_WRITTEN.items() if loaded.file.endswith(name)), None)
    expected = _moved(base.to_json(), ports, kept)
    got = moved.to_json()
    got.pop("port_offset")
    for unit in got["units"]:
        # NATS is told its port only when it is not its own default
        if unit["argv"][-2:] == ["-p", str(4222 + OFFSET)] or unit["argv"][-4:-2] == ["-p", str(4222 + OFFSET)]:
            i = unit["argv"].index("-p")
            del unit["argv"][i : i + 2]
    assert json.dumps(got, indent=1, sort_keys=True) == json.dumps(expected, indent=1, sort_keys=True)


@pytest.mark.parametrize("loaded", _recipes(), ids=lambda r: f"{r.file}:{r.variant or ''}")
def test_every_port_moves_together(loaded: LoadedRecipe) -> None:
    _check(loaded, local=False)


def test_local_demo_moves_together() -> None:
    (loaded,) = load_recipes(ROOT / "recipes/local/demo.yaml")
    _check(loaded, local=True)


def test_offset_zero_plan_has_no_key() -> None:
    """Plans without an offset keep the JSON they had before the field existed."""
    assert "port_offset" not in plan(AGG).to_json()


def test_recipe_written_port_stays() -> None:
    services = "  - {name: gpu, type: dcgm-exporter, options: {port: 9500}}\n  - {name: cpu, type: node-exporter}\n"
    body = AGG + "services:\n" + services
    moved = plan(body, port_offset=10)
    assert {u.name: u.ports for u in moved.units if u.name.startswith("service_")} == {
        "service_etcd": {"client": 2389, "peer": 2390},
        "service_gpu": {"metrics": 9500},
        "service_cpu": {"metrics": 9111},
    }


def test_offset_past_the_last_port_is_a_plan_error() -> None:
    message = plan_error(AGG, port_offset=60000)
    assert "ran out of ports" in message or "past 65535" in message


def test_negative_offset_is_refused() -> None:
    with pytest.raises(PlanError, match="port offset must be 0 or more"):
        plan(AGG, port_offset=-1)


def _cli_plan(*args: str) -> dict[str, Any]:
    from click.testing import CliRunner

    import srtd.cli._commands  # noqa: F401  (registers the commands)
    from srtd.cli._main import cli

    result = CliRunner().invoke(cli, ["plan", str(ROOT / "recipes/local/demo.yaml"), "--json", *args])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_plan_shows_offset_0_unless_one_is_pinned(tmp_path: Path) -> None:
    assert "port_offset" not in _cli_plan("--local")
    pinned = _cli_plan("--local", "--port-offset", "20")
    assert pinned["port_offset"] == 20
    assert next(u for u in pinned["units"] if u["name"] == "frontend_0")["ports"] == {"http": 8020}
    settings = tmp_path / "srtslurm.yaml"
    settings.write_text("port_offset: auto\n")
    auto = _cli_plan("--cluster-config", str(settings), "--job-id", "1234")
    assert auto["port_offset"] == 340
    assert (
        _cli_plan("--cluster-config", str(settings), "--job-id", "1234", "--port-offset", "0").get("port_offset")
        is None
    )
