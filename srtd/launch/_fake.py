"""`FakeLauncher`: scripted attempts, no processes.  A test seam for supervisor logic.

Each unit gets a script: one `FakeRun` per attempt (the last one repeats).  A run
writes its scripted log lines into the real log file at the scripted times (so the
supervisor's tailer, fatal patterns and log probes see them), exits when its script
says so, and reacts to SIGTERM after `term_delay` seconds (or never).  Timing goes
through the same clock the supervisor uses, so a fast clock makes long scripts quick.
Everything the supervisor did is recorded in `starts` and `signals`.
"""

from __future__ import annotations

import itertools
import signal as _signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import anyio
import anyio.abc

from srtd._value import value_class
from srtd.errors import LaunchError
from srtd.launch._protocol import ExitStatus, Stray
from srtd.launch._tool import ToolRun, slurm_tool
from srtd.unit import Unit


class _Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class _RealClock:
    def now(self) -> float:
        return anyio.current_time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@value_class
class FakeRun:
    """What one scripted attempt does."""

    exit_after: float | None = None  # seconds after start; None: runs until signalled
    code: int = 0  # exit code at `exit_after`
    signal: int | None = None  # or end killed by this signal at `exit_after`
    lines: tuple[tuple[float, str], ...] = ()  # (seconds after start, text) appended to the log
    term_delay: float | None = 0.0  # seconds from SIGTERM to exit; None: ignores SIGTERM
    term_code: int | None = None  # exit code after SIGTERM; None: dies of SIGTERM
    start_error: str | None = None  # start() raises LaunchError with this message
    settle_after: float = 0.0  # seconds settle() takes (srun waiting for its step); the attempt is live meanwhile
    settle_error: str | None = None  # settle() ends the attempt (exit 1) and raises LaunchError with this message


@value_class
class FakeStart:
    unit: str
    attempt: int
    pid: int
    at: float
    log_path: Path
    spec: Unit | None = None  # the unit as launched (its nodes, argv, env)


@value_class
class FakeSignal:
    unit: str
    attempt: int
    signal: int
    at: float


class FakeHandle:
    def __init__(self, launcher: FakeLauncher, unit: str, attempt: int, pid: int, run: FakeRun) -> None:
        self._launcher = launcher
        self.unit = unit
        self.attempt = attempt
        self._pid = pid
        self.run = run
        self.status: ExitStatus | None = None
        self._exited = anyio.Event()
        self._term_seen = False
        self.nodes: tuple[str, ...] = ()  # the unit's nodes (`FakeLauncher.lose_node`)

    @property
    def pid(self) -> int | None:
        return self._pid

    def end(self, status: ExitStatus) -> None:
        if self.status is None:
            self.status = status
            self._launcher.ends.append((self.unit, self.attempt, status, self._launcher.clock.now()))
            self._exited.set()

    @property
    def step_id(self) -> str | None:
        return None

    def poll(self) -> ExitStatus | None:
        return self.status

    async def settle(self) -> None:
        if self.run.settle_after > 0:
            await self._launcher.clock.sleep(self.run.settle_after)
        if self.run.settle_error is not None:
            self.end(ExitStatus(code=1))
            raise LaunchError(f"{self.unit}: {self.run.settle_error}")

    async def wait(self) -> ExitStatus:
        await self._exited.wait()
        assert self.status is not None
        return self.status

    async def signal(self, sig: int) -> None:
        if self.status is not None:
            return
        launcher = self._launcher
        launcher.signals.append(FakeSignal(self.unit, self.attempt, sig, launcher.clock.now()))
        if sig == _signal.SIGKILL:
            self.end(ExitStatus(signal=_signal.SIGKILL))
        elif sig == _signal.SIGTERM and self.run.term_delay is not None and not self._term_seen:
            self._term_seen = True
            launcher._spawn(self._die_of_term, self.run.term_delay)

    async def kill(self) -> None:
        await self.signal(_signal.SIGKILL)

    async def _die_of_term(self, delay: float) -> None:
        await self._launcher.clock.sleep(delay)
        if self.run.term_code is not None:
            self.end(ExitStatus(code=self.run.term_code))
        else:
            self.end(ExitStatus(signal=_signal.SIGTERM))

    async def _play(self, log_path: Path) -> None:
        clock = self._launcher.clock
        t0 = clock.now()
        steps: list[tuple[float, str | None]] = [(at, text) for at, text in self.run.lines]
        if self.run.exit_after is not None:
            steps.append((self.run.exit_after, None))
        steps.sort(key=lambda s: (s[0], s[1] is None))
        for at, text in steps:
            delay = t0 + at - clock.now()
            if delay > 0:
                await clock.sleep(delay)
            if self.status is not None:
                return
            if text is not None:
                with open(log_path, "ab") as f:
                    f.write(text.encode() + b"\n")
            elif self.run.signal is not None:
                self.end(ExitStatus(signal=self.run.signal))
            else:
                self.end(ExitStatus(code=self.run.code))


class FakeLauncher:
    """A launcher whose attempts are scripts.  Enter it (`async with`) before use."""

    log_watch: str | None = None  # logs are on this machine: inotify where it works

    def __init__(
        self,
        script: Mapping[str, FakeRun | Sequence[FakeRun]] | None = None,
        *,
        default: FakeRun | None = None,
        clock: _Clock | None = None,
        addresses: Mapping[str, str] | None = None,
        strays: Sequence[Stray] = (),
    ) -> None:
        self.script = dict(script or {})
        self.default = default or FakeRun()
        self.clock: _Clock = clock or _RealClock()
        self.addresses = dict(addresses or {})
        self.strays = list(strays)  # what the first `end_strays` reports, as if the units had left them
        self.strays_ended_at: list[float] = []  # when each `end_strays` came
        self.starts: list[FakeStart] = []
        self.signals: list[FakeSignal] = []
        self.ends: list[tuple[str, int, ExitStatus, float]] = []
        self.handles: list[FakeHandle] = []
        self.lost: dict[str, str] = {}  # node -> evidence, as `lose_node` declared it
        self._pids = itertools.count(40000)
        self._tg: anyio.abc.TaskGroup | None = None

    def run_for(self, unit: str, attempt: int) -> FakeRun:
        entry = self.script.get(unit, self.default)
        if isinstance(entry, FakeRun):
            return entry
        if not entry:
            return self.default
        return entry[min(attempt, len(entry) - 1)]

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(*exc_info)
        self._tg = None

    def _spawn(self, fn: object, *args: object) -> None:
        assert self._tg is not None, "FakeLauncher used outside `async with`"
        self._tg.start_soon(fn, *args)  # type: ignore[arg-type]

    def address(self, node: str) -> str:
        return self.addresses.get(node, node)

    async def run_check(self, node: str, argv: Sequence[str], *, timeout: float) -> ToolRun:
        """Every node is this machine: the check runs here."""
        return await slurm_tool(argv, timeout)

    async def end_strays(self, report: Callable[[Stray], None], hurry: anyio.Event | None = None) -> None:
        self.strays_ended_at.append(self.clock.now())
        strays, self.strays = self.strays, []
        for stray in strays:
            report(stray)

    def lose_node(self, node: str, evidence: str = "the test took it away") -> None:
        """As the Slurm launcher's presence check does: every attempt on `node` ends unreachable
        at once, and a start that needs the node is refused from now on."""
        self.lost[node] = evidence
        for handle in self.handles:
            if node in handle.nodes:
                handle.end(ExitStatus.unreachable(f"node {node} lost ({evidence})", node))

    async def start(self, unit: Unit, *, attempt: int, log_path: Path) -> FakeHandle:
        for node in unit.nodes:
            if node in self.lost:
                raise LaunchError(f"{unit.name}: node {node} lost ({self.lost[node]})")
        run = self.run_for(unit.name, attempt)
        if run.start_error is not None:
            raise LaunchError(f"{unit.name}: {run.start_error}")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_bytes(b"")
        pid = next(self._pids)
        handle = FakeHandle(self, unit.name, attempt, pid, run)
        handle.nodes = unit.nodes
        self.handles.append(handle)
        self.starts.append(FakeStart(unit.name, attempt, pid, self.clock.now(), log_path, unit))
        self._spawn(handle._play, log_path)
        return handle

    def live(self) -> list[FakeHandle]:
        return [h for h in self.handles if h.status is None]


__all__ = ["FakeHandle", "FakeLauncher", "FakeRun", "FakeSignal", "FakeStart"]
