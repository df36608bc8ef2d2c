"""Preflight at the supervisor (docs/nodes.md): the real check program run for every node (the fake
launcher runs it here, as the local one does) against `srtd-toy-gpus`; a failing node's units
move to a spare before anything launches; without a spare the job ends at once with exit 8,
naming the node and the check, and nothing is launched."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from srtd.errors import EXIT_PREFLIGHT
from srtd.events import JobState
from srtd.launch import FakeLauncher, FakeRun
from srtd.supervisor import Job, NullConsole, Preflight
from srtd.unit import Plan, Unit, UnitKind

pytestmark = pytest.mark.anyio

FOREIGN = {"nodes": {"node2": {"apps": [{"gpu": 0, "pid": 4242, "used_mib": 30000}]}}}


def _plan(tmp_path: Path, *, spares: tuple[str, ...], preflight: bool = True) -> Plan:
    def unit(name: str, node: str, **fields: Any) -> Unit:
        return Unit(name=name, phase="test", nodes=(node,), argv=("serve",), log=f"{name}.log", **fields)

    units = (
        unit("w1", "node1", kind=UnitKind.WORKER, gpus=(0,)),
        unit("w2", "node2", kind=UnitKind.WORKER, gpus=(0,), env={"PEER": "node2:7000"}),
        unit("bench", "node1", kind=UnitKind.BENCHMARK, terminal=True, env={"TARGET": "node2"}),
    )
    return Plan(
        name="pf",
        job_id="1",
        log_dir=str(tmp_path / "logs"),
        nodes={"head": ("node1",), "decode": ("node2",)},
        allocation=("node1", "node2", *spares),
        phases=("test",),
        units=units,
        spares=spares,
        preflight=preflight,
    )


def _settings(tmp_path: Path) -> Preflight:
    config = tmp_path / "gpus.json"
    config.write_text(json.dumps(FOREIGN), encoding="utf-8")
    return Preflight(budget_seconds=60, gpu_query=f"{sys.executable} -m srtd.toy.gpus --config {config}")


def _node_events(job: Job) -> list[dict[str, Any]]:
    return [e.detail["node"] for e in job.journal.events if e.detail and "node" in e.detail]


async def test_a_node_that_fails_preflight_is_replaced_by_the_spare(tmp_path: Path) -> None:
    launcher = FakeLauncher({"bench": FakeRun(exit_after=0.2)})
    job = Job(_plan(tmp_path, spares=("node3",)), launcher, console=NullConsole(), preflight=_settings(tmp_path))
    result = await job.run()
    assert result.exit_code == 0
    assert sorted(s.unit for s in launcher.starts) == ["bench", "w1", "w2"]
    assert job.plan.unit("w2").nodes == ("node3",)
    assert job.plan.unit("w2").env["PEER"] == "node3:7000"
    assert job.plan.unit("bench").env["TARGET"] == "node3"
    assert job.plan.spares == ()
    events = _node_events(job)
    assert [(e["node"], e["what"]) for e in events] == [
        ("node1", "preflight-passed"),
        ("node2", "preflight-failed"),
        ("node3", "preflight-passed"),
        ("node2", "replaced"),
    ]
    assert events[1]["check"] == "gpus-foreign"
    assert events[1]["evidence"] == "pid 4242 holds 30000 MiB on GPU 0"
    assert events[3]["spare"] == "node3"
    assert events[3]["units"] == ["w2"]  # the units it moved; bench only learns the new address
    saved = json.loads((tmp_path / "logs" / "plan.json").read_text())
    assert [u["nodes"] for u in saved["units"] if u["name"] == "w2"] == [["node3"]]
    # every node event precedes the first launch
    first_launch = next(e.seq for e in job.journal.events if e.unit is not None and e.state == "starting")
    assert max(e.seq for e in job.journal.events if e.detail and "node" in e.detail) < first_launch


async def test_without_a_spare_the_job_fails_at_once_naming_node_and_check(tmp_path: Path) -> None:
    launcher = FakeLauncher()
    job = Job(_plan(tmp_path, spares=()), launcher, console=NullConsole(), preflight=_settings(tmp_path))
    result = await job.run()
    assert result.exit_code == EXIT_PREFLIGHT == 8
    assert result.state is JobState.FAILED
    assert launcher.starts == []
    assert result.reason == (
        "node node2 failed preflight (gpus-foreign: pid 4242 holds 30000 MiB on GPU 0) and no spare node is left;"
        " set resources.spare_nodes (or the cluster's spare_nodes) to hold spares, or preflight: false to run anyway"
    )
    final = job.journal.events[-1]
    assert final.state == "failed"
    assert final.detail == {
        "node": {"node": "node2", "check": "gpus-foreign", "evidence": "pid 4242 holds 30000 MiB on GPU 0"}
    }
    assert all(e.unit is None for e in job.journal.events)  # no unit was ever started
    assert result.postmortem is not None
    said = result.postmortem.read_text()
    assert f"reason: {result.reason}" in said
    assert "node node2 failed preflight: gpus-foreign: pid 4242 holds 30000 MiB on GPU 0" in said


async def test_preflight_false_checks_nothing(tmp_path: Path) -> None:
    launcher = FakeLauncher({"bench": FakeRun(exit_after=0.1)})
    job = Job(
        _plan(tmp_path, spares=(), preflight=False), launcher, console=NullConsole(), preflight=_settings(tmp_path)
    )
    result = await job.run()
    assert result.exit_code == 0
    assert _node_events(job) == []


async def test_when_every_node_passes_the_plan_and_its_runners_are_kept(tmp_path: Path) -> None:
    plan = _plan(tmp_path, spares=("node3",))
    settings = Preflight(budget_seconds=60, gpu_query="")  # no GPU query: every node passes
    job = Job(plan, FakeLauncher({"bench": FakeRun(exit_after=0.1)}), console=NullConsole(), preflight=settings)
    runners = job.runners
    result = await job.run()
    assert result.exit_code == 0
    assert [e["what"] for e in _node_events(job)] == ["preflight-passed"] * 3
    # nothing moved: the same plan object, the same runners, and no plan.json rewritten
    assert (job.plan is plan, job.runners is runners, job.plan.spares) == (True, True, ("node3",))
