"""Re-placement after a lost node: who moves, who restarts, who is left alone (pure), and the
supervisor doing it on scripted attempts (FakeLauncher.lose_node) in fast virtual time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from srtd.attach import build_timeline
from srtd.events import Event, JobView
from srtd.launch import FakeLauncher, FakeRun
from srtd.supervisor import NullConsole, ScaledClock, read_journal, supervise
from srtd.supervisor._replace import choose_spare, decide
from srtd.supervisor._replacing import NO_SPARE_HINT
from srtd.topology import replace_node
from srtd.unit import Edge, LogProbe, Plan, Readiness, ResultsSpec, TcpProbe, Unit, UnitKind
from tests.supervisor.helpers import check_journal, edge

pytestmark = pytest.mark.anyio

ADDR = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3", "n4": "10.0.0.4", "n12": "10.0.0.12"}


def u(name: str, node: str, *argv: str, after: Sequence[Edge] = (), **fields: Any) -> Unit:
    return Unit(
        name=name,
        kind=fields.pop("kind", UnitKind.SERVICE),
        phase="p",
        nodes=(node,),
        argv=("fake", name, *argv),
        log=f"{name}.log",
        after=tuple(after),
        readiness=fields.pop("readiness", Readiness(probe=LogProbe(pattern="ready"), timeout_seconds=1000)),
        **fields,
    )


def plan_of(units: Sequence[Unit], spares: tuple[str, ...] = ("n4",), **fields: Any) -> Plan:
    return Plan(
        name="replace",
        job_id="1",
        log_dir=fields.pop("log_dir", "/tmp/replace-logs"),
        nodes={"head": ("n1",), "prefill": ("n2",), "decode": ("n3",)},
        allocation=("n1", "n2", "n3", "n4"),
        addresses=ADDR,
        phases=("p",),
        units=tuple(units),
        spares=spares,
        **fields,
    )


def stack(infra: str = "n1") -> list[Unit]:
    """etcd; two workers registering in it; a discovery frontend; a static router; a benchmark."""
    etcd = f"http://{ADDR[infra]}:2379"
    return [
        u("etcd", infra, "--listen", etcd, tier=2),
        u("w0", "n2", "--host", "n2", after=[edge("etcd")], env={"ETCD_ENDPOINTS": etcd}),
        u("w1", "n3", "--host", "n3", after=[edge("etcd")], env={"ETCD_ENDPOINTS": etcd}),
        u("fe", "n1", "--etcd", etcd, after=[edge("w0"), edge("w1")]),
        u(
            "router",
            "n1",
            "--worker",
            "http://10.0.0.2:30000",
            "--worker",
            "http://n3:30000",
            after=[edge("w0"), edge("w1")],
        ),
        u(
            "bench",
            "n1",
            "--url",
            "http://n1:8000",
            after=[edge("fe"), edge("router")],
            terminal=True,
            kind=UnitKind.BENCHMARK,
            readiness=None,
            critical=False,
        ),
    ]


# --------------------------------------------------------------------------- pure


def test_a_lost_worker_moves_a_static_router_restarts_discovery_is_kept() -> None:
    before = plan_of(stack())
    after = replace_node(before, "n2", "n4")
    r = decide(before, after, "n2", "n4")
    assert (r.moved, r.restarted, r.disrupted) == (("w0",), ("router",), ("bench",))
    assert r.kept == ("etcd", "w1", "fe")
    assert r.order == ("w0", "router")
    w0 = after.unit("w0")
    assert w0.nodes == ("n4",)
    assert w0.argv == ("fake", "w0", "--host", "n4")
    assert after.unit("router").argv[3] == "http://10.0.0.4:30000"
    assert after.unit("router").argv[5] == "http://n3:30000"
    assert after.spares == ()
    assert after.nodes["prefill"] == ("n4",)
    assert after.allocation == before.allocation


def test_a_lost_infra_node_restarts_every_unit_holding_its_address_in_dependency_order() -> None:
    before = plan_of(stack(infra="n2"))
    r = decide(before, replace_node(before, "n2", "n4"), "n2", "n4")
    assert r.moved == ("etcd", "w0")
    assert r.restarted == ("w1", "fe", "router")  # handed etcd's address, or w0's
    assert r.order == ("etcd", "w0", "w1", "fe", "router")
    assert r.kept == ()


def test_a_name_inside_a_longer_name_or_address_is_not_replaced() -> None:
    units = [u("w", "n2", "--peers", "n12,10.0.0.12:5,n2.cluster:5", env={"X": "10.0.0.2"})]
    after = replace_node(plan_of(units), "n2", "n4").unit("w")
    assert after.argv[3] == "n12,10.0.0.12:5,n4.cluster:5"
    assert after.env == {"X": "10.0.0.4"}


def test_a_generated_file_that_named_the_node_restarts_the_unit_that_reads_it() -> None:
    conf = "/tmp/replace-logs/nginx.conf"
    units = [u("w0", "n2"), u("nginx", "n1", "-c", conf, after=[edge("w0")]), u("other", "n1")]
    before = plan_of(units, files={conf: "upstream { server n2:30000; }"})
    after = replace_node(before, "n2", "n4")
    assert after.files[conf] == "upstream { server n4:30000; }"
    r = decide(before, after, "n2", "n4")
    assert (r.moved, r.restarted, r.kept) == (("w0",), ("nginx",), ("other",))


def test_the_other_ranks_of_a_multi_node_endpoint_restart_with_the_moved_one() -> None:
    probe = Readiness(probe=TcpProbe(node="n2", port=30000))
    units = [
        u("p0_n2", "n2", group="p0", readiness=probe),
        u("p0_n3", "n3", "--dist-init", "10.0.0.2:5000", group="p0", readiness=None),
        u("d0", "n3", group="d0"),
    ]
    before = plan_of(units)
    after = replace_node(before, "n2", "n4")
    r = decide(before, after, "n2", "n4")
    assert (r.moved, r.restarted, r.kept) == (("p0_n2",), ("p0_n3",), ("d0",))
    assert after.unit("p0_n2").readiness == Readiness(probe=TcpProbe(node="n4", port=30000))


def test_the_node_srtd_runs_on_or_no_spare_left_cannot_be_replaced() -> None:
    plan = plan_of(stack())
    assert choose_spare(plan, "n1", set()) is None
    assert choose_spare(plan, "n2", set()) == "n4"
    assert choose_spare(plan, "n2", {"n4"}) is None
    assert choose_spare(plan_of(stack(), spares=()), "n2", set()) is None


# --------------------------------------------------------------------------- the supervisor

READY = FakeRun(lines=((1.0, "ready"),))


async def run_losing(tmp_path: Path, plan: Plan, node: str, bench_run: FakeRun) -> tuple[Any, FakeLauncher]:
    clock = ScaledClock(20.0)
    launcher = FakeLauncher({"bench": bench_run}, default=READY, clock=clock)

    async def lose_mid_benchmark() -> None:
        while not any(s.unit == "bench" for s in launcher.starts):
            await clock.sleep(0.5)
        await clock.sleep(5.0)
        launcher.lose_node(node)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lose_mid_benchmark)
            result = await supervise(plan, launcher, clock=clock, console=NullConsole())
            tg.cancel_scope.cancel()
    names = [x.name for x in plan.units]
    assert check_journal(result.journal, names) == result.events
    assert JobView.fold(read_journal(result.journal), names) == result.view
    assert launcher.live() == []
    return result, launcher


def node_events(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [e.detail["node"] for e in events if e.unit is None and e.detail and "node" in e.detail]


async def test_a_lost_worker_node_is_replaced_and_the_benchmark_runs_again(tmp_path: Path) -> None:
    plan = plan_of(stack(), log_dir=str(tmp_path / "logs"))
    result, launcher = await run_losing(tmp_path, plan, "n2", FakeRun(exit_after=20.0))

    assert result.exit_code == 0
    starts = [(s.unit, s.attempt, s.spec.nodes if s.spec else ()) for s in launcher.starts]
    lost_at = next(i for i, s in enumerate(launcher.starts) if s.unit == "bench") + 1
    after_loss = starts[lost_at:]
    assert [s[0] for s in after_loss] == ["w0", "router", "bench"]  # dependency order, the rest kept
    assert after_loss[0] == ("w0", 1, ("n4",))
    assert all("n2" not in nodes for _, _, nodes in after_loss)
    router = [s.spec for s in launcher.starts if s.unit == "router"]
    assert router[1] is not None
    assert "http://10.0.0.4:30000" in router[1].argv
    assert [s.unit for s in launcher.starts].count("fe") == 1  # discovery: left alone
    # the benchmark ran again only once w0 and the router were ready again
    events = result.events
    bench_again = next(e.seq for e in events if e.unit == "bench" and e.state == "starting" and e.attempt == 1)
    for name in ("w0", "router"):
        assert any(e.unit == name and e.state == "ready" and e.attempt == 1 and e.seq < bench_again for e in events)
    nodes = node_events(events)
    assert [(n["node"], n["what"], n["spare"], n["units"]) for n in nodes] == [
        ("n2", "lost", "n4", ["w0"]),
        ("n2", "replaced", "n4", ["w0"]),
    ]
    assert "node n2 lost (the test took it away)" in nodes[0]["evidence"]
    assert nodes[1]["seconds"] is not None
    assert nodes[1]["seconds"] > 0
    assert result.view.units["w0"].node == "n4"  # srtd attach shows where it runs now
    timeline = build_timeline(result.events)
    assert [(n.node, n.what, n.spare) for n in timeline.nodes] == [("n2", "lost", "n4"), ("n2", "replaced", "n4")]
    assert timeline.as_json()["nodes"][0]["reason"] == "node n2 lost: w0 move to n4; router restart with its address"


async def test_a_lost_infra_node_moves_etcd_and_restarts_its_dependents_in_order(tmp_path: Path) -> None:
    units = stack(infra="n2")
    plan = plan_of(
        [replace(x, nodes=("n3",)) if x.name == "w0" else x for x in units],
        log_dir=str(tmp_path / "logs"),
    )
    result, launcher = await run_losing(tmp_path, plan, "n2", FakeRun(exit_after=20.0))

    assert result.exit_code == 0
    first_bench = next(i for i, s in enumerate(launcher.starts) if s.unit == "bench")
    again = [s.unit for s in launcher.starts[first_bench + 1 :]]
    assert again[0] == "etcd"
    assert again[-1] == "bench"
    assert sorted(again[1:3]) == ["w0", "w1"]
    assert sorted(again[3:5]) == ["fe", "router"]
    etcd = [s.spec for s in launcher.starts if s.unit == "etcd"][1]
    assert etcd is not None
    assert etcd.nodes == ("n4",)


async def test_a_benchmark_on_the_lost_node_moves_and_runs_again_only_once_the_job_serves_again(
    tmp_path: Path,
) -> None:
    # etcd and the benchmark client share n2; the benchmark waits only for w1, which is kept
    # (it names no address of n2), so its own edges would let it start at once
    update = {
        "w0": {"nodes": ("n3",)},
        "w1": {"env": {}},
        "bench": {"nodes": ("n2",), "after": (edge("w1"),)},
    }
    units = [replace(x, **update.get(x.name, {})) for x in stack(infra="n2")]
    plan = plan_of(units, log_dir=str(tmp_path / "logs"))
    result, launcher = await run_losing(tmp_path, plan, "n2", FakeRun(exit_after=20.0))

    assert result.exit_code == 0
    assert node_events(result.events)[0]["units"] == ["etcd", "bench"]
    assert [s.unit for s in launcher.starts].count("w1") == 1
    bench = [s.spec for s in launcher.starts if s.unit == "bench"]
    assert len(bench) == 2
    assert bench[1] is not None
    assert bench[1].nodes == ("n4",)
    events = result.events
    again = next(e.seq for e in events if e.unit == "bench" and e.state == "starting" and e.attempt == 1)
    for name in ("etcd", "w0", "fe", "router"):
        assert any(e.unit == name and e.state == "ready" and e.attempt == 1 and e.seq < again for e in events), name


async def test_without_a_spare_a_lost_node_fails_the_job_as_before_and_says_what_to_set(tmp_path: Path) -> None:
    plan = plan_of(stack(), spares=(), log_dir=str(tmp_path / "logs"))
    result, launcher = await run_losing(tmp_path, plan, "n2", FakeRun(exit_after=20.0))

    assert result.exit_code == 1
    assert result.view.reason == (
        "w0 failed: node n2 lost (the test took it away); not replaced: no spare node is left: " + NO_SPARE_HINT
    )
    assert [s.unit for s in launcher.starts].count("w0") == 1
    (lost,) = node_events(result.events)
    assert (lost["what"], lost["spare"], lost["units"]) == (
        "lost",
        None,
        [
            "w0",
        ],
    )
    assert result.postmortem is not None
    said = [line for line in result.postmortem.read_text().splitlines() if line.startswith("node at ")]
    assert len(said) == 1
    assert said[0].endswith(": node n2 lost and not replaced: no spare node is left: " + NO_SPARE_HINT)
    reasons = [e.reason for e in result.events if e.detail and "node" in e.detail]
    assert reasons == [
        "node n2 lost and not replaced: no spare node is left: set resources.spare_nodes: 1 "
        "in the recipe to replace a lost node"
    ]


def point(concurrency: int) -> str:
    doc = {"points": [{"concurrency": concurrency, "requests_sent": 8, "requests_succeeded": 8, "output_tokens": 80}]}
    return json.dumps(doc)


async def test_the_interrupted_benchmark_results_are_kept_beside_and_results_json_says_so(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    spec = ResultsSpec(reader="srtd", path="bench.json", gpus=2)
    units = [replace(x, results=spec) if x.name == "bench" else x for x in stack()]
    plan = plan_of(units, log_dir=str(log_dir))
    clock = ScaledClock(20.0)
    launcher = FakeLauncher({"bench": FakeRun(exit_after=20.0)}, default=READY, clock=clock)

    async def measure_lose_measure() -> None:
        for attempt in (0, 1):
            while not any(s.unit == "bench" and s.attempt == attempt for s in launcher.starts):
                await clock.sleep(0.5)
            (log_dir / "bench.json").write_text(point(attempt + 1))
            if attempt == 0:
                await clock.sleep(3.0)
                launcher.lose_node("n2")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(measure_lose_measure)
            result = await supervise(plan, launcher, clock=clock, console=NullConsole())

    assert result.exit_code == 0
    kept = log_dir / "bench.json.interrupted.1"
    assert json.loads(kept.read_text()) == json.loads(point(1))
    why = (log_dir / "bench.json.interrupted.1.why").read_text()
    assert why == "restarted once the job serves again: node n2 replaced by n4 while it ran\n"
    results = json.loads((log_dir / "results.json").read_text())
    assert [p["concurrency"] for p in results["points"]] == [2]
    assert results["replacement"] == {"nodes": ["n2"], "interrupted": [str(kept)]}


async def test_on_disruption_fail_ends_the_job_when_a_replacement_cuts_the_benchmark(tmp_path: Path) -> None:
    units = [replace(x, on_disruption="fail") if x.name == "bench" else x for x in stack()]
    plan = plan_of(units, log_dir=str(tmp_path / "logs"))
    result, launcher = await run_losing(tmp_path, plan, "n2", FakeRun(exit_after=20.0))

    assert result.exit_code == 1
    assert result.view.reason == "terminal unit bench node n2 replaced by n4 while it ran (on_disruption: fail)"
    assert [s.unit for s in launcher.starts].count("bench") == 1
    assert '"on_disruption": "fail"' in plan.dumps()
    assert "on_disruption" not in plan_of(stack()).dumps()
