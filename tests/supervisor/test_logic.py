"""The supervisor's logic on scripted attempts (FakeLauncher) in fast virtual time."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from srtd import _early_signals
from srtd.errors import PlanError
from srtd.events import JobState, JobView, UnitState
from srtd.launch import FakeLauncher, FakeRun, StopCause, Stray
from srtd.supervisor import JobResult, NullConsole, ScaledClock, Stop, read_journal, relay_signals, supervise
from srtd.unit import (
    Count,
    Edge,
    Liveness,
    LogProbe,
    Plan,
    Readiness,
    Restart,
    RestartMode,
    Unit,
    UnitKind,
    WorkerCountProbe,
)
from tests.supervisor.helpers import check_journal, edge, states

pytestmark = pytest.mark.anyio

SPEED = 20.0  # virtual seconds per real second


def fu(name: str, *, after: Sequence[Edge] = (), **fields: Any) -> Unit:
    return Unit(
        name=name,
        kind=fields.pop("kind", UnitKind.SERVICE),
        phase="p",
        nodes=("n1",),
        argv=("fake", name),
        log=f"{name}.log",
        after=tuple(after),
        **fields,
    )


def log_ready(pattern: str = "ready", timeout: float = 1000.0) -> Readiness:
    return Readiness(probe=LogProbe(pattern=pattern), timeout_seconds=timeout)


def on_failure(max_restarts: int = 3, backoff: float = 2.0, **kw: Any) -> Restart:
    return Restart(policy=RestartMode.ON_FAILURE, max_restarts=max_restarts, backoff_seconds=backoff, **kw)


class Run:
    def __init__(self, result: JobResult, launcher: FakeLauncher) -> None:
        self.result = result
        self.launcher = launcher
        self.events = result.events

    def states(self, unit: str | None) -> list[str]:
        return states(self.events, unit)

    def index(self, unit: str | None, state: str, nth: int = 0) -> int:
        hits = [i for i, e in enumerate(self.events) if e.unit == unit and e.state == state]
        return hits[nth]

    def started(self, unit: str) -> list[float]:
        return [s.at for s in self.launcher.starts if s.unit == unit]

    def signals(self, unit: str | None = None) -> list[tuple[str, int]]:
        return [(s.unit, s.signal) for s in self.launcher.signals if unit is None or s.unit == unit]

    def signal_times(self, unit: str, sig: int) -> list[float]:
        return [s.at for s in self.launcher.signals if s.unit == unit and s.signal == sig]


async def go(
    tmp_path: Path,
    units: Sequence[Unit],
    script: Mapping[str, FakeRun | Sequence[FakeRun]] | None = None,
    *,
    hold: bool = False,
    stop: Stop | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    default: FakeRun | None = None,
    speed: float = SPEED,
    strays: Sequence[Stray] = (),
) -> Run:
    plan = Plan(
        name="logic",
        job_id="1",
        log_dir=str(tmp_path / "logs"),
        nodes={},
        allocation=("n1",),
        phases=("p",),
        units=tuple(units),
        hold=hold,
    )
    clock = ScaledClock(speed)
    launcher = FakeLauncher(script, clock=clock, default=default, strays=strays)
    with anyio.fail_after(30):
        result = await supervise(
            plan, launcher, clock=clock, console=NullConsole(), stop=stop, http_transport=transport
        )
    names = [u.name for u in units]
    events = check_journal(result.journal, names)
    assert events == result.events
    assert JobView.fold(read_journal(result.journal), names) == result.view
    assert launcher.live() == []
    return Run(result, launcher)


def bench(after: Sequence[Edge], exit_after: float = 1.0) -> tuple[Unit, FakeRun]:
    return fu("bench", after=after, terminal=True, kind=UnitKind.BENCHMARK), FakeRun(exit_after=exit_after)


async def test_start_order_follows_the_graph_and_teardown_goes_by_tier(tmp_path: Path) -> None:
    ready_at_2 = FakeRun(lines=((2.0, "server ready"),))
    ready_at_1 = FakeRun(lines=((1.0, "worker ready"),))
    b, b_run = bench([edge("fe")])
    units = [
        fu("etcd", readiness=log_ready(), tier=2),
        fu("nats", tier=2),
        fu("w0", after=[edge("etcd"), edge("nats", "started")], readiness=log_ready()),
        fu("w1", after=[edge("etcd"), edge("nats", "started")], readiness=log_ready()),
        fu("fe", after=[edge("w0"), edge("w1")], readiness=log_ready()),
        b,
    ]
    script = {"etcd": ready_at_2, "w0": ready_at_1, "w1": ready_at_1, "fe": ready_at_1, "bench": b_run}
    run = await go(tmp_path, units, script)

    assert run.result.exit_code == 0
    assert run.result.state is JobState.SUCCEEDED
    # each dependant starts after what it waits on reached its condition
    assert run.index("w0", "starting") > run.index("etcd", "ready")
    assert run.index("w1", "starting") > run.index("etcd", "ready")
    assert run.index("fe", "starting") > max(run.index("w0", "ready"), run.index("w1", "ready"))
    assert run.index("bench", "starting") > run.index("fe", "ready")
    # units of one phase start together (virtual seconds)
    assert abs(run.started("etcd")[0] - run.started("nats")[0]) < 1.9
    assert abs(run.started("w0")[0] - run.started("w1")[0]) < 1.9
    assert run.started("w0")[0] >= 2.0
    assert run.states("w0") == ["waiting", "starting", "ready", "stopping", "stopped"]
    assert run.states("bench") == ["waiting", "starting", "ready", "exited", "stopped"]
    assert run.states(None) == ["starting", "running", "stopping", "succeeded"]
    # teardown: tier 0 (w0, w1, fe) all get SIGTERM before tier 2 (etcd, nats)
    terms = [u for u, sig in run.signals() if sig == signal.SIGTERM]
    assert set(terms[:3]) == {"w0", "w1", "fe"}
    assert set(terms[3:]) == {"etcd", "nats"}


async def test_started_and_succeeded_conditions(tmp_path: Path) -> None:
    b, b_run = bench([edge("svc"), edge("side", "started")])
    units = [
        fu("build"),
        fu("svc", after=[edge("build", "succeeded")], readiness=log_ready()),
        fu("side", after=[edge("svc", "started")]),
        b,
    ]
    script = {"build": FakeRun(exit_after=1.0), "svc": FakeRun(lines=((3.0, "ready"),)), "bench": b_run}
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 0
    assert run.index("svc", "starting") > run.index("build", "stopped")
    assert run.index("side", "starting") < run.index("svc", "ready")
    assert run.index("side", "starting") > run.index("svc", "starting")
    assert run.states("build") == ["starting", "ready", "exited", "stopped"]


async def test_a_failed_dependency_fails_its_dependants(tmp_path: Path) -> None:
    units = [fu("build", critical=False), fu("svc", after=[edge("build", "succeeded")]), fu("other")]
    run = await go(tmp_path, units, {"build": FakeRun(exit_after=1.0, code=2)})
    assert run.result.exit_code == 1
    assert run.result.state is JobState.FAILED
    assert run.result.reason == "svc failed: dependency build failed"
    assert run.result.culprit == "svc"
    assert run.states("svc") == ["waiting", "failed"]
    assert run.result.view.units["build"].exit_code == 2
    assert run.started("svc") == []
    assert run.signals("other") == [("other", signal.SIGTERM)]


async def test_the_post_mortem_names_the_dependency_that_failed_first(tmp_path: Path) -> None:
    # a non-critical sidecar dies before it is ready; the benchmark waiting on it never runs
    b, _ = bench([edge("sidecar", "ready")])
    units = [fu("sidecar", critical=False, readiness=log_ready()), b]
    run = await go(tmp_path, units, {"sidecar": FakeRun(exit_after=1.0, code=3, lines=((0.5, "boom"),))})
    assert run.result.exit_code == 1
    assert run.result.reason == "bench failed: dependency sidecar failed"
    assert run.started("bench") == []
    postmortem = (tmp_path / "logs" / "postmortem.txt").read_text()
    assert "culprit: sidecar\n" in postmortem
    assert "== sidecar (failed)" in postmortem


async def test_a_non_critical_failure_is_recorded_and_the_job_goes_on(tmp_path: Path) -> None:
    b, b_run = bench([], exit_after=3.0)
    units = [fu("sidecar", critical=False), fu("svc"), b]
    run = await go(tmp_path, units, {"sidecar": FakeRun(exit_after=1.0, code=1), "bench": b_run})
    assert run.result.exit_code == 0
    assert run.states("sidecar")[-2:] == ["exited", "failed"]
    assert run.result.view.units["sidecar"].reason == "exited with exit code 1"
    assert run.result.view.units["svc"].state is UnitState.STOPPED


async def test_worst_terminal_exit_code_wins_and_a_signal_counts_as_128_plus_n(tmp_path: Path) -> None:
    units = [fu("a", terminal=True), fu("b", terminal=True), fu("c", terminal=True), fu("svc")]
    script = {
        "a": FakeRun(exit_after=1.0, code=3),
        "b": FakeRun(exit_after=2.0, signal=signal.SIGKILL),
        "c": FakeRun(exit_after=0.5),
    }
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 137
    assert run.result.state is JobState.FAILED
    assert run.result.culprit == "b"
    assert run.result.reason == "terminal unit b was killed by SIGKILL"
    assert run.result.postmortem is not None


async def test_without_terminal_units_or_hold_the_job_ends_when_every_unit_has(tmp_path: Path) -> None:
    units = [fu("a"), fu("b", after=[edge("a", "succeeded")])]
    run = await go(tmp_path, units, default=FakeRun(exit_after=1.0))
    assert run.result.exit_code == 0
    assert run.result.reason == "every unit has ended"
    assert run.signals() == []


async def test_hold_runs_until_stopped(tmp_path: Path) -> None:
    stop = Stop()
    done: list[Run] = []

    async def job() -> None:
        done.append(await go(tmp_path, [fu("a"), fu("b", critical=False)], hold=True, stop=stop))

    async with anyio.create_task_group() as tg:
        tg.start_soon(job)
        await anyio.sleep(0.3)
        assert not done
        stop.request(signal.SIGUSR1)
    run = done[0]
    assert run.result.exit_code == 128 + signal.SIGUSR1
    assert run.result.state is JobState.CANCELLED
    assert run.result.reason == "received SIGUSR1"
    assert sorted(run.signals()) == [("a", 15), ("b", 15)]
    assert run.result.postmortem is None


async def sigusr1_during(
    job: Callable[[], Awaitable[None]],
    done: list[Run],
    stop: Stop,
    explain: Callable[[int], Awaitable[StopCause | None]],
) -> Run:
    """Run `job` with the signal relay, send srtd itself SIGUSR1 once it runs, return its run."""
    async with anyio.create_task_group() as tg:
        await tg.start(partial(relay_signals, stop, explain=explain))
        tg.start_soon(job)
        await anyio.sleep(0.3)
        os.kill(os.getpid(), signal.SIGUSR1)
        with anyio.fail_after(10):
            while not done:
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    return done[0]


async def test_a_signal_the_launcher_explains_as_the_time_limit_ends_the_job_marked_so(tmp_path: Path) -> None:
    stop = Stop()
    done: list[Run] = []
    asked: list[int] = []

    async def explain(signum: int) -> StopCause:
        asked.append(signum)
        return StopCause("received SIGUSR1 90 s before the time limit", time_limit=True)

    async def job() -> None:
        done.append(await go(tmp_path, [fu("a")], hold=True, stop=stop))

    run = await sigusr1_during(job, done, stop, explain)
    assert asked == [signal.SIGUSR1]
    assert (run.result.state, run.result.exit_code) == (JobState.CANCELLED, 128 + signal.SIGUSR1)
    assert run.result.reason == "received SIGUSR1 90 s before the time limit"
    final = read_journal(run.result.journal)[-1]
    assert (final.state, final.detail) == ("cancelled", {"time_limit": True})


async def test_a_stop_signal_stops_the_units_before_the_launcher_has_explained_it(tmp_path: Path) -> None:
    """The explanation (under Slurm an squeue call, up to 2 s) never holds up the teardown:
    here it only answers once the teardown has signalled the unit, which it could not if
    the stop waited for it."""
    stop = Stop()
    done: list[Run] = []
    journal = tmp_path / "logs" / "events.jsonl"

    def unit_signalled() -> bool:
        return journal.exists() and any(e.unit == "a" and e.state == "stopping" for e in read_journal(journal))

    async def explain(signum: int) -> StopCause | None:
        with anyio.move_on_after(1.5):  # inside EXPLAIN_WAIT: a late answer would be dropped
            while not unit_signalled():
                await anyio.sleep(0.01)
            return StopCause("explained after the units were signalled")
        return None

    async def job() -> None:
        done.append(
            await go(
                tmp_path,
                [fu("a", readiness=log_ready())],
                {"a": FakeRun(lines=((0.0, "ready"),))},
                hold=True,
                stop=stop,
            )
        )

    run = await sigusr1_during(job, done, stop, explain)
    assert run.result.reason == "explained after the units were signalled"
    assert run.signals() == [("a", signal.SIGTERM)]


async def test_exit_before_ready_fails_at_once_not_at_the_timeout(tmp_path: Path) -> None:
    units = [fu("a", readiness=log_ready("never", timeout=10_000.0)), fu("b", after=[edge("a")])]
    t0 = anyio.current_time()
    run = await go(tmp_path, units, {"a": FakeRun(exit_after=1.0, code=3, lines=((0.5, "boom"),))})
    assert anyio.current_time() - t0 < 2.0
    assert run.result.exit_code == 1
    assert run.result.reason == "a failed: exited with exit code 3 before it was ready"
    assert run.states("b") == ["waiting", "failed"]
    text = run.result.postmortem.read_text() if run.result.postmortem else ""
    assert "boom" in text
    assert "exit code 3" in text


async def test_readiness_timeout(tmp_path: Path) -> None:
    run = await go(tmp_path, [fu("a", readiness=log_ready("never", timeout=5.0))])
    assert run.result.exit_code == 1
    assert run.result.reason == "a failed: not ready within 5 s"
    assert run.states("a") == ["starting", "stopping", "failed"]
    assert run.signals("a") == [("a", signal.SIGTERM)]
    assert run.result.view.units["a"].signal == signal.SIGTERM


async def test_readiness_timeout_counts_as_a_failed_attempt_for_restarts(tmp_path: Path) -> None:
    unit = fu("a", readiness=log_ready("never", timeout=5.0), restart=on_failure(max_restarts=1, backoff=1.0))
    run = await go(tmp_path, [unit])
    assert run.result.exit_code == 1
    assert run.result.reason == "a failed: not ready within 5 s (restarts exhausted: 1 of 1)"
    assert run.states("a") == [
        "starting", "stopping", "exited", "backoff", "starting", "stopping", "failed"
    ]  # fmt: skip
    assert [s.attempt for s in run.launcher.starts] == [0, 1]


async def test_restart_backoff_doubles_then_starts_over_after_a_stable_run(tmp_path: Path) -> None:
    policy = on_failure(max_restarts=5, backoff=2.0, stable_seconds=5.0)
    b, b_run = bench([], exit_after=30.0)
    script = {
        "w": [
            FakeRun(exit_after=1.0, code=1),
            FakeRun(exit_after=1.0, code=1),
            FakeRun(exit_after=8.0, code=1),  # ran cleanly for 8 s > stable_seconds
            FakeRun(exit_after=1.0, code=1),
            FakeRun(),
        ],
        "bench": b_run,
    }
    run = await go(tmp_path, [fu("w", restart=policy), b], script, speed=10)
    assert run.result.exit_code == 0
    backoffs = [e.detail for e in run.events if e.unit == "w" and e.state == "backoff"]
    assert [d["delay"] for d in backoffs if d] == [2.0, 4.0, 2.0, 4.0]
    assert [d["restart"] for d in backoffs if d] == [1, 2, 3, 4]
    ends = [at for unit, _, _, at in run.launcher.ends if unit == "w"]
    starts = run.started("w")
    gaps = [starts[i + 1] - ends[i] for i in range(4)]
    for gap, want in zip(gaps, [2.0, 4.0, 2.0, 4.0], strict=True):
        assert want - 0.05 <= gap < want + 1.9  # never early; clearly not the next doubling
    assert run.result.view.units["w"].restarts == 4


async def test_always_restarts_a_clean_exit_up_to_max_restarts(tmp_path: Path) -> None:
    policy = Restart(policy=RestartMode.ALWAYS, max_restarts=2, backoff_seconds=1.0)
    run = await go(tmp_path, [fu("a", restart=policy)], default=FakeRun(exit_after=1.0))
    assert run.result.exit_code == 0
    assert [s.attempt for s in run.launcher.starts] == [0, 1, 2]
    assert run.states("a")[-2:] == ["exited", "stopped"]


async def test_on_failure_does_not_restart_a_clean_exit(tmp_path: Path) -> None:
    run = await go(tmp_path, [fu("a", restart=on_failure())], default=FakeRun(exit_after=1.0))
    assert [s.attempt for s in run.launcher.starts] == [0]


async def test_exhausted_restarts_of_a_critical_unit_fail_the_job(tmp_path: Path) -> None:
    b, b_run = bench([], exit_after=1000.0)
    unit = fu("a", restart=on_failure(max_restarts=2, backoff=1.0))
    run = await go(tmp_path, [unit, b], {"a": FakeRun(exit_after=1.0, code=5), "bench": b_run})
    assert run.result.exit_code == 1
    assert run.result.reason == "a failed: exited with exit code 5 (restarts exhausted: 2 of 2)"
    assert [s.attempt for s in run.launcher.starts if s.unit == "a"] == [0, 1, 2]
    assert run.result.view.units["a"].restarts == 2
    assert run.result.view.units["a"].exit_code == 5


async def test_dependants_see_the_current_state_of_a_restarting_dependency(tmp_path: Path) -> None:
    policy = on_failure(backoff=5.0)
    script = {
        "db": [FakeRun(lines=((1.0, "ready"),), exit_after=2.0, code=1), FakeRun(lines=((1.0, "ready"),))],
        "gate": FakeRun(exit_after=3.0),
        "bench": FakeRun(exit_after=1.0),
    }
    units = [
        fu("db", readiness=log_ready(), restart=policy),
        fu("gate"),
        fu("app", after=[edge("db"), edge("gate", "succeeded")]),
        fu("bench", after=[edge("app")], terminal=True),
    ]
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 0
    # gate succeeded while db was backing off: app waited for db to be ready again
    assert run.index("gate", "stopped") < run.index("db", "ready", nth=1)
    assert run.index("app", "starting") > run.index("db", "ready", nth=1)
    assert run.states("db") == [
        "starting", "ready", "exited", "backoff", "starting", "ready", "stopping", "stopped"
    ]  # fmt: skip


async def test_fatal_line_fails_a_critical_unit_and_stops_the_job(tmp_path: Path) -> None:
    b, b_run = bench([], exit_after=1000.0)
    units = [fu("w", fatal_patterns=(r"CUDA error",), tier=0), fu("etcd", tier=2), b]
    script = {"w": FakeRun(lines=((1.0, "loading"), (2.0, "CUDA error: out of memory"))), "bench": b_run}
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 1
    assert run.result.reason == "w failed: fatal log line: CUDA error: out of memory"
    assert run.states("w") == ["starting", "ready", "stopping", "failed"]
    view = run.result.view.units["w"]
    assert view.reason == "fatal log line: CUDA error: out of memory"
    assert view.signal == signal.SIGTERM
    assert run.result.postmortem is not None
    text = run.result.postmortem.read_text()
    assert "first fatal log line: w: CUDA error: out of memory" in text
    assert "  | loading" not in text  # tails are verbatim in the file
    assert "loading" in text


async def test_fatal_line_restarts_a_unit_with_a_policy(tmp_path: Path) -> None:
    b, b_run = bench([], exit_after=20.0)
    script = {"w": [FakeRun(lines=((1.0, "FATAL: lost rank"),)), FakeRun()], "bench": b_run}
    units = [fu("w", fatal_patterns=("FATAL",), restart=on_failure(backoff=1.0)), b]
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 0
    assert run.states("w")[:6] == ["starting", "ready", "stopping", "exited", "backoff", "starting"]
    assert run.signals("w") == [("w", 15), ("w", 15)]
    assert (tmp_path / "logs" / "w.log.1").read_text() == "FATAL: lost rank\n"


async def test_fatal_line_of_a_non_critical_unit_stops_only_that_unit(tmp_path: Path) -> None:
    b, b_run = bench([], exit_after=5.0)
    script = {"x": FakeRun(lines=((1.0, "FATAL"),)), "bench": b_run}
    run = await go(tmp_path, [fu("x", fatal_patterns=("FATAL",), critical=False), b], script)
    assert run.result.exit_code == 0
    assert run.states("x") == ["starting", "ready", "stopping", "exited", "failed"]


async def test_teardown_by_tier_kills_a_unit_that_ignores_sigterm(tmp_path: Path) -> None:
    stop = Stop()
    units = [
        fu("w", tier=0, terminate_timeout=10.0),
        fu("store", tier=1, terminate_timeout=3.0),
        fu("master", tier=1, terminate_timeout=10.0),
        fu("etcd", tier=2, terminate_timeout=10.0),
    ]
    script = {
        "w": FakeRun(term_delay=2.0),
        "store": FakeRun(term_delay=None),  # ignores SIGTERM
        "master": FakeRun(term_delay=1.0),
        "etcd": FakeRun(term_delay=0.5),
    }
    done: list[Run] = []

    async def job() -> None:
        done.append(await go(tmp_path, units, script, hold=True, stop=stop, speed=10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(job)
        await anyio.sleep(0.2)
        stop.request(signal.SIGTERM)
    run = done[0]
    assert run.result.exit_code == 143
    t_w = run.signal_times("w", signal.SIGTERM)[0]
    t_store = run.signal_times("store", signal.SIGTERM)[0]
    t_master = run.signal_times("master", signal.SIGTERM)[0]
    t_kill = run.signal_times("store", signal.SIGKILL)[0]
    t_etcd = run.signal_times("etcd", signal.SIGTERM)[0]
    # lower bounds are exact (a sleep never ends early); upper bounds are generous and
    # only show that no longer timeout (10 s) was waited out
    assert 2.0 <= t_store - t_w < 4.5  # tier 1 once w is down (after 2 s, not its 10 s)
    assert abs(t_master - t_store) < 1.0  # one tier: SIGTERM at once
    assert 3.0 <= t_kill - t_store < 5.5  # its terminate_timeout (3 s), then SIGKILL
    assert 0.0 <= t_etcd - t_kill < 2.5  # tier 2 right after (master was down after 1 s)
    assert run.result.view.units["store"].signal == signal.SIGKILL
    assert run.result.view.units["store"].reason == "killed after 3 s (SIGTERM not obeyed)"
    assert [run.result.view.units[n].state for n in ("w", "store", "master", "etcd")] == [UnitState.STOPPED] * 4


async def test_a_kill_request_sigkills_everything_at_once(tmp_path: Path) -> None:
    stop = Stop()
    units = [fu("w", tier=0, terminate_timeout=1000.0), fu("etcd", tier=2, terminate_timeout=1000.0)]
    script = {"w": FakeRun(term_delay=None), "etcd": FakeRun(term_delay=None)}
    done: list[Run] = []

    async def job() -> None:
        done.append(await go(tmp_path, units, script, hold=True, stop=stop))

    async with anyio.create_task_group() as tg:
        tg.start_soon(job)
        await anyio.sleep(0.2)
        stop.request(signal.SIGINT)
        await anyio.sleep(0.2)
        t0 = anyio.current_time()
        stop.kill(signal.SIGINT)
    assert anyio.current_time() - t0 < 1.0
    run = done[0]
    assert run.result.exit_code == 130
    assert sorted(run.signals()) == [("etcd", 9), ("w", 9), ("w", 15)]


async def test_units_waiting_or_in_backoff_just_become_stopped(tmp_path: Path) -> None:
    stop = Stop()
    units = [
        fu("crashy", restart=on_failure(backoff=1000.0)),
        fu("blocked", after=[edge("never_ready")]),
        fu("never_ready", readiness=log_ready("never")),
    ]
    done: list[Run] = []

    async def job() -> None:
        done.append(await go(tmp_path, units, {"crashy": FakeRun(exit_after=1.0, code=1)}, stop=stop))

    async with anyio.create_task_group() as tg:
        tg.start_soon(job)
        await anyio.sleep(0.3)
        stop.request(signal.SIGTERM)
    run = done[0]
    assert run.states("crashy") == ["starting", "ready", "exited", "backoff", "stopped"]
    assert run.states("blocked") == ["waiting", "stopped"]
    assert run.signals("crashy") == []
    assert run.signals("never_ready") == [("never_ready", 15)]


async def test_a_group_restarts_together(tmp_path: Path) -> None:
    policy = on_failure(backoff=2.0)
    b, b_run = bench([], exit_after=20.0)
    units = [fu("p0_a", group="p0", restart=policy), fu("p0_b", group="p0", restart=policy), fu("other"), b]
    # p0_b takes 4 s to obey SIGTERM, longer than the 2 s backoff: the relaunch waits for it
    script = {"p0_a": [FakeRun(exit_after=1.0, code=1), FakeRun()], "p0_b": FakeRun(term_delay=4.0), "bench": b_run}
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 0
    p0 = [(s.unit, s.attempt) for s in run.launcher.starts if s.unit.startswith("p0")]
    assert sorted(p0[:2]) == [("p0_a", 0), ("p0_b", 0)]
    assert sorted(p0[2:]) == [("p0_a", 1), ("p0_b", 1)]
    a0 = run.started("p0_a")[0]
    first_term = run.signal_times("p0_b", signal.SIGTERM)[0]
    assert 1.0 <= first_term - a0 < 2.9  # the sibling is stopped at once, not after the backoff
    a1, b1 = run.started("p0_a")[1], run.started("p0_b")[1]
    assert a1 - a0 >= 1.0 + 4.0  # not after 2 s of backoff: after the sibling was down
    assert abs(a1 - b1) < 1.9  # together
    b_exited = run.index("p0_b", "exited")
    assert run.index("p0_a", "starting", nth=1) > b_exited
    assert run.index("p0_b", "starting", nth=1) > b_exited
    reason = next(e.reason for e in run.events if e.unit == "p0_b" and e.state == "backoff")
    assert reason is not None
    assert "restarted with group p0: p0_a exited with exit code 1" in reason
    assert run.started("other") == [run.started("other")[0]]


async def test_worker_count_gate_with_a_mock_transport(tmp_path: Path) -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        healthy = max(0, len(calls) - 3)
        return httpx.Response(200, json={"instances": [{"component": "decode"}] * min(healthy, 2)})

    gate = WorkerCountProbe(
        node="head", port=8000, path="/health", decode=(Count(items="instances", where={"component": "decode"}),),
        expect_decode=2,
    )  # fmt: skip
    b, b_run = bench([edge("fe")])
    units = [fu("fe", readiness=Readiness(probe=gate, interval_seconds=1.0)), b]
    transport = httpx.MockTransport(handler)
    run = await go(tmp_path, units, {"bench": b_run}, transport=transport)
    assert run.result.exit_code == 0
    assert len(calls) == 5
    assert calls[0] == "http://head:8000/health"  # FakeLauncher.address is the node name


async def test_launch_error_and_run_timeout(tmp_path: Path) -> None:
    units = [fu("a", critical=False), fu("b", run_timeout=2.0, critical=False), fu("c", terminal=True)]
    script = {"a": FakeRun(start_error="no such image"), "c": FakeRun(exit_after=5.0)}
    run = await go(tmp_path, units, script)
    assert run.result.exit_code == 0
    assert run.result.view.units["a"].reason == "launch failed: a: no such image"
    assert run.states("a") == ["failed"]
    assert run.result.view.units["b"].reason == "did not finish within 2 s"


async def test_invalid_plans_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="unknown unit 'ghost'"):
        await go(tmp_path, [fu("a", after=[edge("ghost")])])
    with pytest.raises(PlanError, match="bad pattern"):
        await go(tmp_path, [fu("a", fatal_patterns=("(",))])
    # A heartbeat RE2 cannot run (lookahead) was not checked before: the watcher raised at run time.
    heartbeat = Liveness(probe=LogProbe(pattern="beat(?!s)"))
    with pytest.raises(PlanError, match=r"^unit 'a': bad pattern 'beat\(\?!s\)': invalid perl operator"):
        await go(tmp_path, [fu("a", liveness=heartbeat)])
    with pytest.raises(PlanError, match="appears twice"):
        await go(tmp_path, [fu("a"), fu("a")])


async def test_generated_files_are_written_before_any_launch(tmp_path: Path) -> None:
    conf = tmp_path / "logs" / "gen" / "nginx.conf"  # inside the log directory, as every file srtd writes
    plan = Plan(
        name="files", job_id="1", log_dir=str(tmp_path / "logs"), nodes={}, allocation=("n1",), phases=("p",),
        units=(fu("a"),), files={str(conf): "worker_processes 1;\n"},
    )  # fmt: skip
    seen: list[str] = []

    class Spy(FakeLauncher):
        async def start(self, unit: Unit, *, attempt: int, log_path: Path) -> Any:
            seen.append(conf.read_text())
            return await super().start(unit, attempt=attempt, log_path=log_path)

    with anyio.fail_after(10):
        result = await supervise(plan, Spy(default=FakeRun(exit_after=0.1)), console=NullConsole())
    assert result.exit_code == 0
    assert seen == ["worker_processes 1;\n"]


@pytest.fixture
def early_signals() -> Iterator[None]:
    """`srtd run`'s early catch installed in this process, the default handlers put back after."""
    before = {s: signal.getsignal(s) for s in _early_signals.STOP_SIGNALS}
    _early_signals.take()
    _early_signals.catch()
    try:
        yield
    finally:
        _early_signals.take()
        for s, handler in before.items():
            signal.signal(s, handler)


@pytest.mark.usefixtures("early_signals")
async def test_a_signal_that_came_while_srtd_was_starting_stops_the_job_once_it_listens(tmp_path: Path) -> None:
    """Slurm's early warning can come in srtd's first second (up to 60 s early): it is noted, not fatal,
    and the relay acts on it as soon as it listens, explained like any other."""
    os.kill(os.getpid(), signal.SIGUSR1)  # before anything listens: its default action would end pytest
    stop = Stop()
    asked: list[int] = []

    async def explain(signum: int) -> StopCause:
        asked.append(signum)
        return StopCause("received SIGUSR1 45 s before the time limit", time_limit=True)

    async with anyio.create_task_group() as tg:
        await tg.start(partial(relay_signals, stop, explain=explain))
        run = await go(tmp_path, [fu("a")], hold=True, stop=stop)
        tg.cancel_scope.cancel()
    assert asked == [signal.SIGUSR1]
    assert (run.result.state, run.result.exit_code) == (JobState.CANCELLED, 128 + signal.SIGUSR1)
    assert run.result.reason == "received SIGUSR1 45 s before the time limit"
    assert _early_signals.take() == []  # taken once, by the relay


@pytest.mark.usefixtures("early_signals")
def test_while_starting_one_ctrl_c_is_noted_and_a_second_interrupts() -> None:
    os.kill(os.getpid(), signal.SIGHUP)
    os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    assert _early_signals.take() == [signal.SIGHUP, signal.SIGINT]
