"""Spare nodes in the plan (docs/nodes.md): `resources.spare_nodes` and the cluster's default,
the sbatch header (+N nodes, --no-kill), `Plan.spares`, what `srtd plan` shows, and
`replace_node`, the pure move of a node's units onto a spare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srtd.cluster import Cluster
from srtd.plan import sbatch_script
from srtd.topology import replace_node
from tests.command import REPO as ROOT
from tests.command import run_srtd
from tests.plan._util import HEAD, PD, load_problems, plan, plan_error


def _head(count: int) -> str:
    return HEAD.replace("resources: {gpus_per_node: 8}", f"resources: {{gpus_per_node: 8, spare_nodes: {count}}}")


def test_without_spares_the_plan_has_no_spares_key_and_no_no_kill() -> None:
    p = plan(PD)
    assert p.spares == ()
    assert "spares" not in p.to_json()
    assert "no-kill" not in sbatch_script(p, ["r.yaml"])
    assert p.sbatch is not None
    assert p.sbatch.nodes == 2


def test_spares_are_the_last_nodes_and_carry_no_unit() -> None:
    p = plan(PD, head=_head(2))
    assert p.allocation == ("node1", "node2", "node3", "node4")
    assert p.spares == ("node3", "node4")
    assert p.to_json()["spares"] == ["node3", "node4"]
    assert {n for u in p.units for n in u.nodes} == {"node1", "node2"}
    assert "node3" not in json.dumps(p.nodes)
    assert "node4" not in json.dumps(p.nodes)


def test_sbatch_asks_for_the_spares_and_no_kill() -> None:
    p = plan(PD, head=_head(1))
    script = sbatch_script(p, ["r.yaml"])
    assert "#SBATCH --nodes=3\n" in script
    assert "#SBATCH --ntasks=3\n" in script
    assert "#SBATCH --no-kill\n" in script


def test_the_cluster_setting_is_the_default_and_the_recipe_wins() -> None:
    assert plan(PD, Cluster(spare_nodes=2)).spares == ("node3", "node4")
    assert plan(PD, Cluster(spare_nodes=2), head=_head(0)).spares == ()
    assert plan(PD, Cluster(spare_nodes=2), head=_head(1)).spares == ("node3",)


def test_a_local_plan_has_no_spares() -> None:
    assert plan(PD, Cluster(), head=_head(1), local=True).spares == ()


def test_an_allocation_without_room_for_the_spares_is_refused() -> None:
    message = plan_error(PD, head=_head(1), nodes=["a", "b"])
    assert message == "the recipe needs 2 nodes (prefill 1, decode 1) and 1 spare, allocation has 2"


def test_an_allocation_holds_its_spares_at_the_end() -> None:
    p = plan(PD, Cluster(), head=_head(1), nodes=["a", "b", "c"])
    assert p.spares == ("c",)
    assert p.nodes["prefill"] == ("a",)
    assert p.nodes["decode"] == ("b",)


def test_a_negative_spare_count_is_refused_at_its_line() -> None:
    problems = load_problems(PD, head=_head(-1))
    assert [(path, message) for _, path, message in problems] == [
        ("resources.spare_nodes", "input should be greater than or equal to 0, got -1")
    ]


def test_preflight_false_is_kept_in_the_plan_and_on_is_no_key() -> None:
    assert "preflight" not in plan(PD).to_json()
    assert plan(PD + "preflight: false\n").to_json()["preflight"] is False
    assert plan(PD + "preflight: {enabled: false}\n").preflight is False


def test_replace_node_moves_every_unit_and_every_mention() -> None:
    p = plan(PD, Cluster(), head=_head(1), addresses={"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"})
    moved = replace_node(p, "node2", "node3")
    assert moved.spares == ()
    assert moved.allocation == p.allocation  # the lost node stays in the allocation
    assert moved.nodes["decode"] == ("node3",)
    for before, after in zip(p.units, moved.units, strict=True):
        assert after.name == before.name
        assert after.log == before.log
        assert after.gpus == before.gpus
        assert after.ports == before.ports
        assert after.role == before.role
        assert after.nodes == tuple("node3" if n == "node2" else n for n in before.nodes)
        text = json.dumps([after.argv, after.env, after.preamble])
        assert "10.0.0.2" not in text
        assert "node2" not in text.replace("node2_", "")
    probes = [u.readiness.probe for u in moved.units if u.readiness is not None]
    assert "node2" not in [getattr(probe, "node", None) for probe in probes]


def test_replace_node_changes_whole_names_only() -> None:
    p = plan(PD, Cluster(), head=_head(1), addresses={"node1": "10.0.0.12", "node2": "10.0.0.1", "node3": "10.0.0.3"})
    moved = replace_node(p, "node2", "node3")
    text = json.dumps([u.env for u in moved.units])
    assert text.count('"HEAD_NODE_IP": "10.0.0.12"') == 2  # node1's address holds node2's as a prefix: untouched
    assert '"10.0.0.1"' not in text
    decode = moved.unit("decode_0_node2")
    assert "/logs/workers/node2_config.json" in decode.argv  # a file name is not a node name


def test_replace_node_refuses_a_node_that_is_no_spare() -> None:
    p = plan(PD, head=_head(1))
    with pytest.raises(ValueError, match="node2 is not a spare node of the plan"):
        replace_node(p, "node1", "node2")


def test_srtd_plan_shows_the_spares_and_what_they_take_over() -> None:
    shown = run_srtd("plan", "recipes/slurm-dev/spare.yaml", "--slurm")
    assert shown.returncode == 0, shown.stderr
    assert "spare      node3" in shown.stdout
    assert (
        "spares: node3 held back (sbatch --no-kill); the first healthy one takes over every unit, GPU and port"
        " of a node that fails preflight or is lost: node1 (3 units), node2 (1 unit); e.g. node1 -> node3"
    ) in shown.stdout
    as_json = run_srtd("plan", "recipes/slurm-dev/spare.yaml", "--slurm", "--json")
    assert json.loads(as_json.stdout)["spares"] == ["node3"]


def test_srtd_plan_says_when_preflight_is_off(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text((ROOT / "recipes/slurm-dev/spare.yaml").read_text() + "preflight: false\n")
    shown = run_srtd("plan", str(recipe), "--slurm")
    assert shown.returncode == 0, shown.stderr
    assert "preflight: off (the nodes are not checked before launch)" in shown.stdout
    assert "preflight: off" not in run_srtd("plan", "recipes/slurm-dev/spare.yaml", "--slurm").stdout
