"""Liveness with real processes: a worker frozen with SIGSTOP, a heartbeat that stops.

Every unit runs `tests/programs/unitprog.py`; `--freeze ATTEMPTS:T` makes it SIGSTOP
itself (all its threads stop, the kernel keeps accepting on its listening socket).
"""

from __future__ import annotations

import inspect
import os
import signal
import time
from collections.abc import Awaitable, Callable

import anyio
import pytest

from srtd.events import Event, JobState, UnitState
from srtd.launch import LocalLauncher
from srtd.supervisor import JobResult, NullConsole, Stop, supervise
from srtd.unit import HttpProbe, Liveness, LogProbe, Plan, Readiness, Restart, RestartMode, TcpProbe
from tests.supervisor.helpers import PlanMaker, check_journal, free_port

pytestmark = pytest.mark.anyio

PERIOD = 0.3
THRESHOLD = 3
PROBE_TIMEOUT = 0.2
# Units freeze 2 s after they start: after they are ready even when a loaded machine
# takes a second to start Python (a freeze before ready would be a readiness timeout).


class Watching(NullConsole):
    """A silent console that keeps every event and wakes a waiter on a match."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._waiters: list[tuple[Callable[[Event], bool], anyio.Event]] = []

    def event(self, event: Event) -> None:
        self.events.append(event)
        for match, done in self._waiters:
            if match(event):
                done.set()

    async def until(self, match: Callable[[Event], bool], timeout: float = 15.0) -> None:
        if any(match(e) for e in self.events):
            return
        done = anyio.Event()
        self._waiters.append((match, done))
        with anyio.fail_after(timeout):
            await done.wait()


def http_ready(port: int) -> Readiness:
    return Readiness(probe=HttpProbe(node="node0", port=port), timeout_seconds=10, interval_seconds=0.5)


def http_liveness(port: int, **fields: object) -> Liveness:
    values: dict[str, object] = {
        "probe": HttpProbe(node="node0", port=port),
        "period_seconds": PERIOD,
        "timeout_seconds": PROBE_TIMEOUT,
        "failure_threshold": THRESHOLD,
        **fields,
    }
    return Liveness(**values)


async def run_until(
    plan: Plan,
    console: Watching,
    stop_when: Callable[[Event], bool] | Callable[[], Awaitable[None]] | None,
    timeout: float = 30.0,
) -> JobResult:
    """Run the job; once `stop_when` matches an event (or returns), request a stop (SIGTERM)."""
    stop = Stop()
    results: list[JobResult] = []

    async def job() -> None:
        results.append(await supervise(plan, LocalLauncher(guardian_grace=1.0), console=console, stop=stop))

    with anyio.fail_after(timeout):
        async with anyio.create_task_group() as tg:
            tg.start_soon(job)
            if stop_when is not None:
                if inspect.iscoroutinefunction(stop_when):
                    await stop_when()
                else:
                    await console.until(stop_when, timeout)  # type: ignore[arg-type]
                stop.request(signal.SIGTERM)
    result = results[0]
    check_journal(result.journal, [u.name for u in plan.units])
    return result


def is_(unit: str, state: str, attempt: int | None = None) -> Callable[[Event], bool]:
    return lambda e: e.unit == unit and e.state == state and (attempt is None or e.attempt == attempt)


def unit_events(result: JobResult, unit: str) -> list[Event]:
    return [e for e in result.events if e.unit == unit]


async def test_a_frozen_worker_is_found_stopped_restarted_and_ready_again(maker: PlanMaker) -> None:
    port = free_port()
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff_seconds=0.2)
    maker.unit(
        "w",
        "--http",
        str(port),
        "--freeze",
        "0:2.0",
        readiness=http_ready(port),
        liveness=http_liveness(port),
        restart=policy,
        terminate_timeout=20.0,
    )
    console = Watching()
    result = await run_until(maker.plan(hold=True), console, is_("w", "ready", attempt=1))

    frozen_at = maker.first("w", "freeze", attempt=0)["t"]
    events = unit_events(result, "w")
    stopping = next(e for e in events if e.state == "stopping")
    assert stopping.attempt == 0
    assert stopping.reason is not None
    assert stopping.reason.startswith(f"unhealthy: http http://127.0.0.1:{port}/health failed 3 times (last: ")
    assert stopping.detail is not None
    verdict = stopping.detail["unhealthy"]
    assert verdict["probe"] == f"http http://127.0.0.1:{port}/health"
    assert verdict["failures"] == THRESHOLD
    assert "ReadTimeout" in verdict["last"] or "no answer" in verdict["last"]
    # Declared after `failure_threshold` periods of the hang, not at once and not much later.
    decided = stopping.ts - frozen_at
    assert (THRESHOLD - 1) * PERIOD <= decided <= THRESHOLD * PERIOD + 5.0  # generous: a loaded machine
    # Stopped on SIGCONT + SIGTERM within its own shutdown, not at the 20 s SIGKILL deadline.
    exited = next(e for e in events if e.state == "exited" and e.attempt == 0)
    assert exited.signal == signal.SIGTERM
    assert exited.reason == f"stopped: {stopping.reason}"
    assert exited.ts - stopping.ts < 5.0
    assert [e.state for e in events] == [
        "starting",
        "ready",
        "stopping",
        "exited",
        "backoff",
        "starting",
        "ready",
        "stopping",
        "stopped",
    ]
    assert result.state is JobState.CANCELLED
    assert result.view.units["w"].restarts == 1
    assert [m["event"] for m in maker.marks("w") if m["attempt"] == 0] == ["start", "freeze", "signal", "exit"]


async def test_a_frozen_critical_worker_without_restarts_fails_the_job(maker: PlanMaker) -> None:
    port = free_port()
    maker.unit(
        "w",
        "--http",
        str(port),
        "--freeze",
        "0:2.0",
        readiness=http_ready(port),
        liveness=http_liveness(port),
        terminate_timeout=20.0,
    )
    maker.unit("bench", "--exit", "0:25", terminal=True)
    started = time.monotonic()
    result = await run_until(maker.plan(), Watching(), None)
    assert time.monotonic() - started < 15.0  # the frozen worker did not cost its 20 s SIGKILL deadline
    assert result.state is JobState.FAILED
    assert result.exit_code == 1
    assert result.culprit == "w"
    assert result.reason is not None
    assert result.reason.startswith("w failed: unhealthy: http http://127.0.0.1:")
    assert "failed 3 times (last: " in result.reason
    w = result.view.units["w"]
    assert w.state is UnitState.FAILED
    assert w.signal == signal.SIGTERM  # ended on SIGCONT + SIGTERM, not SIGKILL
    assert result.postmortem is not None
    postmortem = result.postmortem.read_text()
    verdict = next(e for e in result.events if e.unit == "w" and e.state == "stopping").detail
    assert verdict is not None
    assert f"(last: {verdict['unhealthy']['last']})" in postmortem
    assert "culprit: w" in postmortem


async def test_a_tcp_probe_alone_does_not_see_a_sigstop_hang(maker: PlanMaker) -> None:
    port, listener = free_port(), free_port()
    tcp_live = Liveness(
        probe=TcpProbe(node="node0", port=listener),
        period_seconds=PERIOD,
        timeout_seconds=PROBE_TIMEOUT,
        failure_threshold=THRESHOLD,
    )
    # `--listen` has a backlog of 64 (the HTTP server's is 5): the kernel completes every
    # handshake of the probes below for the stopped process.  Once a backlog is full,
    # connects do time out; with a real server's backlog (thousands) that takes hours.
    maker.unit(
        "w",
        "--http",
        str(port),
        "--listen",
        str(listener),
        "--freeze",
        "0:2.0",
        readiness=http_ready(port),
        liveness=tcp_live,
    )
    # Ten periods after the freeze the kernel still accepts for the stopped process.
    maker.unit("bench", "--exit", f"0:{2.0 + 10 * PERIOD}", terminal=True)
    result = await run_until(maker.plan(), Watching(), None)
    assert result.state is JobState.SUCCEEDED
    assert [m["event"] for m in maker.marks("w")][:2] == ["start", "freeze"]
    assert [e.state for e in unit_events(result, "w")] == ["starting", "ready", "stopping", "stopped"]
    assert result.view.units["w"].reason == "stopped"


async def test_a_job_stopped_while_a_worker_is_frozen_tears_down_in_its_normal_time(maker: PlanMaker) -> None:
    port = free_port()
    # A hang nobody probes for: only the stop path (SIGCONT + SIGTERM) is under test.
    maker.unit("w", "--http", str(port), "--freeze", "0:2.0", readiness=http_ready(port), terminate_timeout=20.0)
    maker.unit("etcd", tier=2)
    console = Watching()

    async def ready_and_frozen() -> None:
        await console.until(is_("w", "ready"))
        while not any(m["event"] == "freeze" for m in maker.marks("w")):
            await anyio.sleep(0.02)
        await anyio.sleep(0.2)  # well inside the stop: SIGSTOP has taken effect

    result = await run_until(maker.plan(hold=True), console, ready_and_frozen)
    teardown = next(e.ts for e in result.events if e.unit is None and e.state == "cancelled") - next(
        e.ts for e in result.events if e.unit is None and e.state == "stopping"
    )
    assert teardown < 5.0  # far from the 20 s terminate_timeout
    w = result.view.units["w"]
    assert w.state is UnitState.STOPPED
    assert w.signal == signal.SIGTERM
    assert w.reason == "stopped"
    assert [m["event"] for m in maker.marks("w")] == ["start", "freeze", "signal", "exit"]


UP = Readiness(probe=LogProbe(pattern="^up$"), timeout_seconds=10)  # checks start once Python runs


def heartbeat_args(until: float, every: float = 0.1) -> list[str]:
    args: list[str] = ["--say", "0.05:up"]
    t = 0.1
    while t <= until + 1e-9:
        args += ["--say", f"{t:.2f}:heartbeat attempt {{attempt}}"]
        t += every
    return args


async def test_a_unit_whose_heartbeat_stops_is_restarted(maker: PlanMaker) -> None:
    live = Liveness(
        probe=LogProbe(pattern="heartbeat"), period_seconds=PERIOD, failure_threshold=2, log_silence_seconds=None
    )
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff_seconds=0.1)
    # Beats for 1 s (the first attempt then falls silent; so would the second, later).
    maker.unit("w", *heartbeat_args(1.0), readiness=UP, liveness=live, restart=policy)
    console = Watching()
    result = await run_until(maker.plan(hold=True), console, is_("w", "starting", attempt=1))
    stopping = next(e for e in unit_events(result, "w") if e.state == "stopping")
    assert stopping.attempt == 0
    assert stopping.reason == f"unhealthy: log /heartbeat/ failed 2 times (last: no matching line in {PERIOD:g} s)"
    assert stopping.ts - maker.first("w", "start", attempt=0)["t"] >= 1.0


async def test_log_silence_restarts_a_quiet_unit_and_leaves_a_chatty_one_alone(maker: PlanMaker) -> None:
    silence = Liveness(period_seconds=PERIOD, failure_threshold=2, log_silence_seconds=0.6)
    policy = Restart(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff_seconds=0.1)
    maker.unit("quiet", *heartbeat_args(0.8), readiness=UP, liveness=silence, restart=policy)
    maker.unit("chatty", *heartbeat_args(6.0), readiness=UP, liveness=silence, restart=policy)
    console = Watching()
    result = await run_until(maker.plan(hold=True), console, is_("quiet", "starting", attempt=1))
    quiet = next(e for e in unit_events(result, "quiet") if e.state == "stopping")
    assert quiet.attempt == 0
    assert quiet.reason is not None
    assert quiet.reason.startswith("unhealthy: log silence (0.6 s) failed 2 times (last: no new log line for ")
    chatty = unit_events(result, "chatty")
    assert [e.state for e in chatty] == ["starting", "ready", "stopping", "stopped"]
    assert chatty[-1].reason == "stopped"
    assert result.view.units["chatty"].restarts == 0


async def test_sigterm_to_a_stopped_local_unit_comes_with_sigcont(maker: PlanMaker) -> None:
    """The launcher alone: a SIGSTOPped group that handles SIGTERM ends on `signal(SIGTERM)`."""
    unit = maker.unit("w", "--say", "0.1:up", terminate_timeout=20.0)
    async with LocalLauncher(guardian_grace=1.0) as launcher:
        handle = await launcher.start(unit, attempt=0, log_path=maker.log_dir / "w.log")
        with anyio.fail_after(10):
            while not any(m["event"] == "say" for m in maker.marks("w")):  # its SIGTERM handler is set
                await anyio.sleep(0.02)
        assert handle.pid is not None
        os.kill(handle.pid, signal.SIGSTOP)
        os.killpg(handle.pid, signal.SIGTERM)  # SIGTERM alone stays pending on a stopped process
        await anyio.sleep(0.5)
        assert handle.poll() is None
        await handle.signal(signal.SIGTERM)
        with anyio.fail_after(5):
            status = await handle.wait()
    assert status.signal == signal.SIGTERM
    assert [m["event"] for m in maker.marks("w")] == ["start", "say", "signal", "exit"]
