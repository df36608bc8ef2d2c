"""What the supervisor knows about a process: the `Launcher` and `Handle` protocols.

The supervisor never touches a pid, a pipe or `srun` itself.  A launcher turns a
`Unit` into a running attempt and hands back a `Handle`; the handle is awaited for
the exit and used to signal the attempt.  `LocalLauncher` runs children on this
machine; `SlurmLauncher` fits the same shape: `start` spawns `srun --job-name=...`
(the handle waits for the srun client), `signal` is `scancel --signal=<SIG> --full
<job>.<step>`, `kill` is `scancel --signal=KILL`, `address` is the node's NodeAddr.
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from srtd._value import value_class

# A signal N as an exit code (128 + N) is the exit-code table's to say.
from srtd.errors import exit_for_signal
from srtd.unit import Unit

if TYPE_CHECKING:
    import anyio

    from srtd.launch._tool import ToolRun  # only a type here: `srtd plan` imports this module and loads no anyio


@value_class(slots=True)
class ExitStatus:
    """How an attempt ended: an exit code, or the signal that killed it."""

    code: int | None = None
    signal: int | None = None
    lost: str | None = None  # the attempt could not be reached any more (its node was lost): why
    node: str | None = None  # with `lost`: the node that was lost, when the launcher knows it

    @classmethod
    def unreachable(cls, reason: str, node: str | None = None) -> ExitStatus:
        """The attempt is given up because it cannot be reached (`node node2 lost (...)`)."""
        return cls(lost=reason, node=node)

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        """From `Popen.returncode`: negative means killed by that signal."""
        if returncode < 0:
            return cls(signal=-returncode)
        return cls(code=returncode)

    @property
    def failed(self) -> bool:
        """Anything but a clean exit 0 (a signal is always a failure)."""
        return self.signal is not None or self.code != 0

    @property
    def shell_code(self) -> int:
        """The code a shell would report: the exit code, or 128 + N for signal N."""
        if self.signal is not None:
            return exit_for_signal(self.signal)
        return self.code if self.code is not None else 1

    def describe(self) -> str:
        """`exit code 3`, `killed by SIGKILL`, or why it was lost."""
        if self.lost is not None:
            return self.lost
        if self.signal is not None:
            return f"killed by {signal_name(self.signal)}"
        if self.code is not None:
            return f"exit code {self.code}"
        return "unknown exit status"


@value_class(slots=True)
class StopCause:
    """Why a stop signal came, as the launcher knows it (under Slurm: the time limit)."""

    reason: str
    time_limit: bool = False  # the job is ending because its time is up


@value_class(slots=True)
class Stray:
    """A process a unit left behind outside its process group, found after the teardown."""

    pid: int
    command: str  # its command line (shortened), or `[comm]` when it has none
    unit: str  # the unit it came from
    grace: float  # seconds from SIGTERM to SIGKILL: the unit's terminate_timeout

    def describe(self) -> str:
        return f"process {self.pid} ({self.command}) outlived unit {self.unit}, which left it behind"

    def detail(self) -> dict[str, object]:
        """The journal's `detail.stray` (docs/events.md)."""
        return {"pid": self.pid, "command": self.command, "unit": self.unit, "grace": self.grace}


def signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Handle(Protocol):
    """One running attempt of a unit."""

    @property
    def pid(self) -> int | None:
        """The local pid that represents the attempt (the srun client under Slurm), if any."""
        ...

    @property
    def step_id(self) -> str | None:
        """The Slurm step the attempt runs as (`<job>.<step>`), where there is one."""
        ...

    def poll(self) -> ExitStatus | None:
        """How the attempt ended if that is already known, else None.  Never blocks."""
        ...

    async def settle(self) -> None:
        """Until the launch is known to have taken (under Slurm: the step exists or srun
        ended; bounded).  Raises `srtd.errors.LaunchError` when it was refused, after the
        attempt has ended.  Cancellable at any point: the handle can already signal the
        attempt, so a teardown need not wait for this."""
        ...

    async def wait(self) -> ExitStatus:
        """Until the attempt has ended.  Idempotent; safe to call again after a cancellation."""
        ...

    async def signal(self, sig: int) -> None:
        """Deliver `sig` to every process of the attempt.  A no-op once it has ended."""
        ...

    async def kill(self) -> None:
        """SIGKILL every process of the attempt.  A no-op once it has ended."""
        ...


class Launcher(Protocol):
    """How a `Unit` becomes a process.  Used as an async context manager around the job.

    Contract of `start`: when it returns, the attempt runs (or is being started: see
    `Handle.settle`) and `log_path` receives its stdout and stderr from the start of a
    fresh (created or truncated) file.  It raises `srtd.errors.LaunchError` when the
    attempt cannot be started, and does not wait on anything outside this machine: the
    supervisor calls it shielded from cancellation, so its handle is never lost.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def start(self, unit: Unit, *, attempt: int, log_path: Path) -> Handle: ...

    @property
    def log_watch(self) -> str | None:
        """How the supervisor watches unit logs: `poll` where they are written on other
        nodes (a shared file system sends no inotify events here); None: the default."""
        ...

    def address(self, node: str) -> str:
        """The host a readiness probe connects to for `node`."""
        ...

    async def run_check(self, node: str, argv: Sequence[str], *, timeout: float) -> ToolRun:
        """Run a short command on `node` to its end (at most `timeout` s) and say what it printed:
        the preflight check (docs/nodes.md).  Under Slurm one step on that node; locally a process here."""
        ...

    async def end_strays(self, report: Callable[[Stray], None], hurry: anyio.Event | None = None) -> None:
        """After the units' teardown: end every process the units left behind outside their process
        groups (calling `report` for each before it is signalled), and reap it.  Each gets
        SIGTERM, then SIGKILL after its unit's `terminate_timeout`, or at once when `hurry` is set.  Under Slurm
        a no-op: a step's processes are ended by its cgroup."""
        ...
