"""The supervisor with the local launcher and real processes (tests/programs/unitprog.py)."""

from __future__ import annotations

import io
import json
import signal
import socket

import anyio
import pytest

from srtd.events import JobState, UnitState
from srtd.launch import LocalLauncher
from srtd.supervisor import JobResult, NullConsole, Stop, TerminalConsole, supervise
from srtd.unit import (
    Count,
    HttpProbe,
    LogProbe,
    Plan,
    Readiness,
    Restart,
    RestartMode,
    TcpProbe,
    UnitKind,
    WorkerCountProbe,
)
from tests.supervisor.helpers import PlanMaker, check_journal, edge, free_port

pytestmark = pytest.mark.anyio


def tcp(port: int, timeout: float = 10.0, interval: float = 2.0) -> Readiness:
    return Readiness(probe=TcpProbe(node="node0", port=port), timeout_seconds=timeout, interval_seconds=interval)


async def run_plan(plan: Plan, console: object = None, stop: Stop | None = None) -> JobResult:
    with anyio.fail_after(30):
        result = await supervise(
            plan,
            LocalLauncher(guardian_grace=1.0),
            console=console or NullConsole(),  # type: ignore[arg-type]
            stop=stop,
        )
    check_journal(result.journal, [u.name for u in plan.units])
    return result


def event_ts(result: JobResult, unit: str | None, state: str) -> float:
    return next(e.ts for e in result.events if e.unit == unit and e.state == state)


async def test_a_whole_job_starts_in_graph_order_with_every_probe_type(maker: PlanMaker) -> None:
    etcd_port, w0_port, w1_port, fe_port = (free_port() for _ in range(4))
    body = json.dumps({"instances": [{"component": "decode"}, {"component": "decode"}]})
    gate = WorkerCountProbe(
        node="node0",
        port=fe_port,
        path="/health",
        decode=(Count(items="instances", where={"component": "decode"}),),
        expect_decode=2,
    )
    maker.unit("etcd", "--listen", f"{etcd_port}:0.3", readiness=tcp(etcd_port), tier=2)
    maker.unit(
        "sidecar",
        "--say",
        "0.2:sidecar listening on 9000",
        readiness=Readiness(probe=LogProbe(pattern=r"listening on \d+")),
        after=[edge("etcd", "started")],
    )
    for name, port in (("w0", w0_port), ("w1", w1_port)):
        maker.unit(
            name,
            "--http",
            f"{port}:0.3",
            readiness=Readiness(probe=HttpProbe(node="node0", port=port, path="/health")),
            after=[edge("etcd")],
        )
    maker.unit(
        "fe",
        "--http",
        f"{fe_port}:0.1",
        "--body",
        body,
        readiness=Readiness(probe=gate),
        after=[edge("w0"), edge("w1")],
    )
    maker.unit("bench", "--exit", "0:0.2", after=[edge("fe"), edge("sidecar")], terminal=True, kind=UnitKind.BENCHMARK)
    result = await run_plan(maker.plan())

    assert result.exit_code == 0
    assert result.state is JobState.SUCCEEDED
    start = {n: maker.first(n, "start")["t"] for n in ("etcd", "sidecar", "w0", "w1", "fe", "bench")}
    # each dependant started after its dependency reached the condition
    assert start["w0"] >= start["etcd"] + 0.3
    assert start["w1"] >= start["etcd"] + 0.3
    assert start["sidecar"] < start["etcd"] + 0.3  # only needs etcd started
    assert start["fe"] >= max(start["w0"], start["w1"]) + 0.3
    assert start["bench"] >= start["fe"] + 0.1
    assert start["bench"] >= maker.first("sidecar", "say")["t"]
    # w0 and w1 start together and live side by side
    assert abs(start["w0"] - start["w1"]) < 0.3
    assert maker.first("w0", "start")["t"] < maker.first("w1", "exit")["t"]
    assert maker.first("w1", "start")["t"] < maker.first("w0", "exit")["t"]
    # every probe passed promptly once its condition held (well within the 2 s interval)
    assert event_ts(result, "etcd", "ready") - (start["etcd"] + 0.3) < 0.6
    assert event_ts(result, "sidecar", "ready") - maker.first("sidecar", "say")["t"] < 0.3
    # teardown: every running unit got SIGTERM; tier 0 was down before tier 2 was signalled
    for name in ("etcd", "sidecar", "w0", "w1", "fe"):
        assert maker.first(name, "signal")["sig"] == signal.SIGTERM
        assert result.view.units[name].state is UnitState.STOPPED
    etcd_term = maker.first("etcd", "signal")["t"]
    assert all(maker.first(n, "exit")["t"] <= etcd_term for n in ("sidecar", "w0", "w1", "fe"))
    assert result.view.units["bench"].exit_code == 0


async def test_exit_before_ready_fails_at_once_with_the_code_and_the_log_tail(maker: PlanMaker) -> None:
    port = free_port()
    maker.unit(
        "w",
        "--say",
        "0.2:error: cannot load the model",
        "--exit",
        "3:0.3",
        readiness=tcp(port, timeout=60.0),
    )
    out = io.StringIO()
    result = await run_plan(maker.plan(), console=TerminalConsole(out, tty=False))
    exited = maker.first("w", "exit")["t"]
    # at once: well inside the 60 s readiness timeout it would otherwise wait out (a bound, not a speed)
    assert event_ts(result, None, "stopping") - exited < 3.0
    assert result.exit_code == 1
    assert result.reason == "w failed: exited with exit code 3 before it was ready"
    printed = out.getvalue()
    assert "job failed: w failed: exited with exit code 3 before it was ready" in printed
    assert "culprit: w, exit code 3" in printed
    assert "  | error: cannot load the model" in printed
    assert result.postmortem is not None
    assert "error: cannot load the model" in result.postmortem.read_text()
    final = result.events[-1]  # the journal carries the post-mortem for readers without the log dir
    assert (final.unit, final.state) == (None, "failed")
    carried = (final.detail or {})["postmortem"]
    assert (carried["unit"], carried["exit_code"]) == ("w", 3)
    assert carried["reason"] == "exited with exit code 3 before it was ready"
    assert "error: cannot load the model" in carried["log"]


async def test_a_port_another_program_holds_fails_the_unit_before_it_starts(maker: PlanMaker) -> None:
    # Without the check the stray listener would answer `w`'s probe and the job would go on.
    with socket.socket() as stray:
        stray.bind(("127.0.0.1", 0))
        stray.listen()
        port = stray.getsockname()[1]
        maker.unit("dep", "--exit", "0:30", tier=2)
        maker.unit("w", "--exit", "0:30", ports={"http": port}, readiness=tcp(port), after=[edge("dep", "started")])
        out = io.StringIO()
        result = await run_plan(maker.plan(), console=TerminalConsole(out, tty=False))
    taken = f"w: port {port} (http) is already in use on this machine"
    assert result.exit_code == 1
    assert result.reason is not None
    assert result.reason.startswith(f"w failed: launch failed: {taken}")
    printed = out.getvalue()
    assert "no log: w never started" in printed
    assert maker.marks("w") == []  # never started
    # dep was launched and stopped with the job; w never got past its launch
    assert [e.state for e in result.events if e.unit == "dep"][-1] == "stopped"
    assert [e.state for e in result.events if e.unit == "w"][-1] == "failed"
    assert not any(e.state == "starting" for e in result.events if e.unit == "w")


async def test_an_echoed_unit_has_its_lines_on_the_console_and_others_do_not(maker: PlanMaker) -> None:
    maker.unit("bench", "--say", "0.1:| concurrency | errors |", "--exit", "0:0.3", echo=True, terminal=True)
    maker.unit("quiet", "--say", "0.1:not mirrored", tier=2)
    out = io.StringIO()
    result = await run_plan(maker.plan(), console=TerminalConsole(out, tty=False))
    assert result.exit_code == 0
    printed = out.getvalue()
    assert "bench | | concurrency | errors |" in printed
    assert "not mirrored" not in printed


async def test_readiness_timeout_says_so(maker: PlanMaker) -> None:
    port = free_port()
    maker.unit("w", readiness=tcp(port, timeout=0.6))
    result = await run_plan(maker.plan())
    assert result.exit_code == 1
    assert result.reason is not None
    assert result.reason.startswith("w failed: not ready within 0.6 s (last probe: tcp 127.0.0.1:")
    assert result.reason.endswith(": Connection refused)")
    assert maker.first("w", "signal")["sig"] == signal.SIGTERM


async def test_a_fatal_line_stops_the_job_at_once(maker: PlanMaker) -> None:
    maker.unit("w", "--say", "0.3:starting up", "--say", "0.5:NCCL error: unhandled system error",
               fatal_patterns=(r"NCCL error",))  # fmt: skip
    maker.unit("etcd", tier=2)
    result = await run_plan(maker.plan(hold=True))
    written = next(m["t"] for m in maker.marks("w") if m["event"] == "say" and "NCCL" in m["text"])
    assert event_ts(result, None, "stopping") - written < 3.0  # the job holds forever otherwise
    assert result.exit_code == 1
    assert result.reason == "w failed: fatal log line: NCCL error: unhandled system error"
    assert result.view.units["w"].state is UnitState.FAILED
    assert result.view.units["etcd"].state is UnitState.STOPPED


async def test_non_critical_failure_keeps_the_job_going(maker: PlanMaker) -> None:
    maker.unit("exporter", "--exit", "2:0.1", critical=False)
    maker.unit("bench", "--exit", "0:0.6", terminal=True)
    result = await run_plan(maker.plan())
    assert result.exit_code == 0
    assert result.view.units["exporter"].state is UnitState.FAILED
    assert result.view.units["exporter"].exit_code == 2


async def test_restarts_back_off_b_then_2b_and_keep_crashed_logs(maker: PlanMaker) -> None:
    b = 0.4
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=3, backoff_seconds=b, stable_seconds=60)
    maker.unit("w", "--say", "0.05:attempt {attempt} up", "--crash", "0,1:3:0.2", restart=policy)
    maker.unit("bench", "--exit", "0:2.4", terminal=True)
    result = await run_plan(maker.plan())
    assert result.exit_code == 0
    marks = maker.marks("w")
    starts = [m["t"] for m in marks if m["event"] == "start"]
    exits = [m["t"] for m in marks if m["event"] == "exit" and m.get("code") == 3]
    assert len(starts) == 3
    assert len(exits) == 2
    # The delays srtd chose are exact; the gaps between the journal's exit and the next
    # launch are bounded below by them (and above only generously: a loaded machine).
    w_events = [e for e in result.events if e.unit == "w"]
    assert [e.detail["delay"] for e in w_events if e.state == "backoff" and e.detail] == [b, 2 * b]
    exited = [e.ts for e in w_events if e.state == "exited"]
    launched = [e.ts for e in w_events if e.state == "starting"]
    first_gap, second_gap = launched[1] - exited[0], launched[2] - exited[1]
    assert b - 0.02 <= first_gap <= b + 1.0
    assert 2 * b - 0.02 <= second_gap <= 2 * b + 1.0
    log = maker.log_dir / "w.log"
    assert (maker.log_dir / "w.log.1").read_text() == "attempt 0 up\n"
    assert (maker.log_dir / "w.log.2").read_text() == "attempt 1 up\n"
    assert log.read_text() == "attempt 2 up\n"
    assert result.view.units["w"].restarts == 2
    w_states = [e.state for e in result.events if e.unit == "w"]
    assert w_states.count("backoff") == 2
    assert w_states[-2:] == ["stopping", "stopped"]


async def test_exhausted_restarts_fail_a_critical_unit(maker: PlanMaker) -> None:
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=1, backoff_seconds=0.1)
    maker.unit("w", "--exit", "4:0.1", restart=policy)
    maker.unit("bench", "--exit", "0:30", terminal=True)
    result = await run_plan(maker.plan())
    assert result.exit_code == 1
    assert result.reason == "w failed: exited with exit code 4 (restarts exhausted: 1 of 1)"
    assert len([m for m in maker.marks("w") if m["event"] == "start"]) == 2


async def test_teardown_by_tier_with_a_unit_that_ignores_sigterm(maker: PlanMaker) -> None:
    maker.unit("w", "--term-delay", "0.3", tier=0, terminate_timeout=5.0)
    maker.unit("store", "--ignore-term", tier=1, terminate_timeout=0.6)
    maker.unit("master", tier=1, terminate_timeout=5.0)
    maker.unit("etcd", tier=2, terminate_timeout=5.0)
    stop = Stop()
    results: list[JobResult] = []

    async def job() -> None:
        results.append(await run_plan(maker.plan(hold=True), stop=stop))

    async with anyio.create_task_group() as tg:
        tg.start_soon(job)
        with anyio.fail_after(10):
            while not all(maker.marks(n) for n in ("w", "store", "master", "etcd")):
                await anyio.sleep(0.02)
        stop.request(signal.SIGTERM)
    result = results[0]
    assert result.exit_code == 143
    assert result.state is JobState.CANCELLED
    term = {n: maker.first(n, "signal")["t"] for n in ("w", "store", "master", "etcd")}
    w_exit = maker.first("w", "exit")["t"]
    assert w_exit - term["w"] >= 0.3
    assert term["store"] >= w_exit  # tier 1 only once tier 0 is down
    assert abs(term["store"] - term["master"]) < 0.2  # one tier: SIGTERM at once
    # store was waited for, then killed.  Its mark is written when its handler runs, which
    # can lag srtd's SIGTERM on a loaded machine, while the 0.6 s deadline runs from the send.
    assert term["etcd"] - term["store"] >= 0.6 - 0.05
    assert [m["event"] for m in maker.marks("store")] == ["start", "signal"]  # no exit: SIGKILL
    store = result.view.units["store"]
    assert store.signal == signal.SIGKILL
    assert store.reason == "killed after 0.6 s (SIGTERM not obeyed)"
    teardown = event_ts(result, None, "cancelled") - event_ts(result, None, "stopping")
    assert 0.9 <= teardown <= 0.9 + 0.6  # ≈ 0.3 (tier 0) + 0.6 (tier 1) + ~0 (tier 2)
