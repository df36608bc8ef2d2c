"""Readiness driven by events: a log line or a worker becoming ready triggers a probe.

The job runs on a `FrozenClock`, whose time never passes: a probe scheduled by the
clock never runs again, so a unit that becomes ready can only have been probed
because something nudged it.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import pytest

from srtd.events import JobState, UnitState
from srtd.launch import FakeLauncher, FakeRun, LocalLauncher
from srtd.supervisor import JobResult, NullConsole, supervise
from srtd.supervisor._probes import NUDGE_WINDOW, REFUSED_PACE, NudgeBucket, ProbePacer, ProbeResult
from srtd.unit import Count, HttpProbe, LogProbe, Plan, Readiness, TcpProbe, Unit, UnitKind, WorkerCountProbe
from tests.supervisor.helpers import PlanMaker, check_journal, edge, free_port

pytestmark = pytest.mark.anyio


class FrozenClock:
    """Time stands still: every positive sleep lasts forever."""

    def now(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            await anyio.sleep_forever()
        await anyio.lowlevel.checkpoint()


def fake_unit(name: str, readiness: Readiness | None = None, **fields: object) -> Unit:
    return Unit(
        name=name,
        kind=fields.pop("kind", UnitKind.SERVICE),  # type: ignore[arg-type]
        phase="p",
        nodes=("n1",),
        argv=("fake", name),
        log=f"{name}.log",
        readiness=readiness,
        **fields,  # type: ignore[arg-type]
    )


async def run_fake(tmp_path: Path, units: list[Unit], script: dict[str, FakeRun], handler: object) -> JobResult:
    plan = Plan(
        name="nudge", job_id="1", log_dir=str(tmp_path / "logs"), nodes={}, allocation=("n1",), phases=("p",),
        units=tuple(units),
    )  # fmt: skip
    launcher = FakeLauncher(script)  # the scripts run on real time; the job's clock is frozen
    with anyio.fail_after(30):
        result = await supervise(
            plan,
            launcher,
            clock=FrozenClock(),
            console=NullConsole(),
            http_transport=httpx.MockTransport(handler),  # type: ignore[arg-type]
        )
    check_journal(result.journal, [u.name for u in units])
    assert launcher.live() == []
    return result


def bench_unit(after: str) -> Unit:
    return fake_unit("bench", after=(edge(after),), terminal=True, kind=UnitKind.BENCHMARK)


async def test_a_log_line_triggers_the_http_probe(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "srv.log"
    answers: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if "Uvicorn running" not in (log.read_text() if log.exists() else ""):
            answers.append("refused")
            raise httpx.ConnectError("connection refused", request=request)
        answers.append("200")
        return httpx.Response(200)

    probe = HttpProbe(node="n1", port=8000, path="/health")
    units = [fake_unit("srv", Readiness(probe=probe, interval_seconds=600.0)), bench_unit("srv")]
    script = {
        "srv": FakeRun(lines=((0.3, "INFO: loading weights"), (0.4, "Uvicorn running on http://0.0.0.0:8000"))),
        "bench": FakeRun(exit_after=0.1),
    }
    result = await run_fake(tmp_path, units, script, handler)
    assert result.state is JobState.SUCCEEDED
    assert answers[0] == "refused"  # probed at launch, before the line
    assert answers[-1] == "200"  # and again only because the line arrived: the clock stood still
    assert result.view.units["srv"].state is UnitState.STOPPED


async def test_a_worker_becoming_ready_triggers_the_gate(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "w.log"
    seen: list[int] = []

    def ready_workers() -> int:
        # The worker's own log, not the journal file: that is written behind the live events.
        return (log.read_text() if log.exists() else "").count("worker ready")

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(ready_workers())
        return httpx.Response(200, json={"instances": [{"component": "decode"}] * seen[-1]})

    gate = WorkerCountProbe(
        node="n1", port=8000, path="/workers", decode=(Count(items="instances", where={"component": "decode"}),),
        expect_decode=1,
    )  # fmt: skip
    units = [
        fake_unit("fe", Readiness(probe=gate, interval_seconds=600.0)),
        fake_unit("w", Readiness(probe=LogProbe(pattern="ready")), after=(edge("fe", "started"),)),
        bench_unit("fe"),
    ]
    script = {"w": FakeRun(lines=((0.3, "worker ready"),)), "bench": FakeRun(exit_after=0.1)}
    result = await run_fake(tmp_path, units, script, handler)
    assert result.state is JobState.SUCCEEDED
    assert seen[0] == 0  # the gate's first answer: no worker yet
    assert seen[-1] == 1  # asked again when the worker became ready, not by the (frozen) clock
    fe_ready = next(i for i, e in enumerate(result.events) if e.unit == "fe" and e.state == "ready")
    w_ready = next(i for i, e in enumerate(result.events) if e.unit == "w" and e.state == "ready")
    assert w_ready < fe_ready


async def test_a_listening_line_triggers_the_tcp_probe_of_a_real_process(maker: PlanMaker) -> None:
    port = free_port()
    readiness = Readiness(probe=TcpProbe(node="node0", port=port), interval_seconds=600.0, timeout_seconds=600.0)
    maker.unit("srv", "--listen", f"{port}:0.4", "--say", f"0.6:listening on port {port}", readiness=readiness)
    maker.unit("bench", "--exit", "0:0", after=[edge("srv")], terminal=True, kind=UnitKind.BENCHMARK)
    with anyio.fail_after(30):
        result = await supervise(
            maker.plan(), LocalLauncher(guardian_grace=1.0), clock=FrozenClock(), console=NullConsole()
        )
    check_journal(result.journal, ["srv", "bench"])
    assert result.state is JobState.SUCCEEDED
    assert maker.first("bench", "start")["t"] >= maker.first("srv", "say")["t"]


# ---------------------------------------------------------------- the pacer's rules

REFUSED = ProbeResult(False, "Connection refused")
NOT_READY = ProbeResult(False, "HTTP 503 (want 200)", answered=True)


def test_an_http_server_that_answered_not_ready_is_not_nudged_within_the_interval() -> None:
    pacer = ProbePacer(HttpProbe(node="n", port=1), interval=10.0, now=0.0)
    assert pacer.after(0.0, NOT_READY) == 10.0
    assert pacer.nudge(5.0) is False  # a chatty log does not hammer an engine's health endpoint
    assert pacer.nudge(10.0) is True
    assert pacer.after(10.0, REFUSED) < 1.0  # the server went away: quick again after a nudge


def test_refusals_are_followed_quickly_then_at_the_pace() -> None:
    pacer = ProbePacer(TcpProbe(node="n", port=1), interval=10.0, now=0.0)
    assert pacer.after(0.0, REFUSED) == 0.05
    assert pacer.after(0.05, REFUSED) == 0.1
    assert pacer.after(0.15, REFUSED) == 0.2
    assert pacer.after(0.35, REFUSED) == 0.25
    assert pacer.after(20.0, REFUSED) == REFUSED_PACE  # after the first interval: cheap refusals stay frequent
    assert pacer.nudge(20.0) is True
    assert pacer.after(20.0, REFUSED) == 0.25  # a nudge brings back the quick pace for a while
    assert pacer.after(20.0 + NUDGE_WINDOW, REFUSED) == REFUSED_PACE


def test_the_gate_is_nudged_even_after_an_answer() -> None:
    gate = WorkerCountProbe(node="n", port=1, path="/workers", expect_decode=1)
    pacer = ProbePacer(gate, interval=10.0, now=0.0)
    pacer.after(20.0, ProbeResult(False, "prefill 0/0, decode 0/1", answered=True))
    assert pacer.nudge(20.5) is True  # the router is asked, not an engine: a worker may have registered
    assert pacer.after(30.0, ProbeResult(False, "prefill 0/0, decode 0/1", answered=True)) == 10.0
    http = ProbePacer(HttpProbe(node="n", port=1), interval=10.0, now=0.0)
    assert http.after(30.0, REFUSED) == REFUSED_PACE  # nothing listens yet: as cheap as a TCP refusal


def test_nudges_may_burst_then_are_rate_limited() -> None:
    bucket = NudgeBucket(now=0.0, rate=4.0, burst=2.0)
    bucket.take(0.0)
    assert bucket.wait(0.01) == 0.0  # two lines in a row are both followed at once
    bucket.take(0.01)
    assert bucket.wait(0.02) > 0.2  # a chatty log: at most 4 a second from now on
    assert bucket.wait(0.3) == 0.0
