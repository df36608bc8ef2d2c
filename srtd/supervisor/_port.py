"""The narrow ports through which a unit, and a service, see their job.

A `UnitRunner` holds a `JobPort`, never the `Job`: what a unit may read of the job
(the clock, the HTTP client, whether the job is stopping, the state of its peers)
and what it may ask of it (launch, record an event, fail the job, watch a log,
restart its group) is listed here and nowhere else.  Control verbs (`srtd attach`'s
restart and signal) reach a unit through its own methods, so the job keeps no
back door into a runner either.

A service (the attach server, status reporting) holds a `ServicePort`: the job's plan,
log directory and journal to read, and the control verbs of `srtd attach`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Unpack

from anyio.streams.memory import MemoryObjectReceiveStream

from srtd.events import Event, EventFacts, UnitState
from srtd.launch import Handle
from srtd.supervisor._clock import Clock
from srtd.supervisor._journal import Journal, Listener
from srtd.supervisor._tail import LogLine, Tailer
from srtd.unit import Condition, Plan, Unit

if TYPE_CHECKING:
    import httpx

    from srtd.supervisor._attempt import Verdict


class Peer(Protocol):
    """Another unit, as a dependant sees it."""

    name: str
    root_cause: str | None

    def verdict(self, condition: Condition) -> Verdict: ...

    def why_not(self, condition: Condition) -> str: ...


class JobPort(Protocol):
    """Everything a `UnitRunner` may use of its job."""

    @property
    def clock(self) -> Clock: ...

    @property
    def http(self) -> httpx.AsyncClient: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def stop_requested(self) -> bool:
        """A stop was asked for (a signal): a unit that ends now was stopped from outside."""
        ...

    @property
    def log_space_full(self) -> bool:
        """The log directory's file system was full at the last look (`_diskspace`)."""
        ...

    # -- state and events
    def emit(self, unit: str, state: UnitState, **facts: Unpack[EventFacts]) -> Event: ...

    def unit_state(self, unit: str) -> UnitState: ...

    def peer(self, name: str) -> Peer: ...

    async def changed(self) -> None: ...

    def fail(self, unit: str, reason: str) -> None: ...

    def record_fatal(self, unit: str, line: str) -> None: ...

    def echo(self, unit: str, line: str) -> None: ...

    # -- processes and their logs
    async def launch(self, unit: Unit, *, attempt: int, log_path: Path) -> Handle: ...

    def address(self, node: str) -> str: ...

    def tailer(self, path: Path) -> Tailer: ...

    def rotate_log(self, path: Path, target: Path) -> None: ...

    # -- a lost node replaced by a spare (`_replacing.py`)
    def node_lost(self, unit: str, node: str, reason: str) -> str | None:
        """`unit`'s attempt ended because `node` is lost.  None: it is launched again on the spare;
        else why the node is not replaced, for the unit's reason ("" for nothing to add)."""
        ...

    def set_aside(self, unit: str, number: int, why: str) -> None:
        """Keep what a benchmark's interrupted attempt measured beside its results."""
        ...

    # -- multi-node groups restart together
    def restart_group(self, origin: str, reason: str, delay: float) -> None: ...

    async def group_relaunch(self, unit: str) -> None: ...


class ServicePort(Protocol):
    """Everything a service (`srtd.supervisor.Service`) may use of its job."""

    @property
    def plan(self) -> Plan: ...

    @property
    def log_dir(self) -> Path: ...

    @property
    def journal(self) -> Journal:
        """The job's journal; the job makes a new one as it starts, so read it each time."""
        ...

    @property
    def units(self) -> tuple[str, ...]:
        """Every unit's name, in the plan's order."""
        ...

    def log_path(self, unit: str) -> Path:
        """`unit`'s log file; `ControlError` for a unit the job does not have."""
        ...

    def listen(self, listener: Listener) -> None: ...

    # -- the control verbs of `srtd attach`; each raises `ControlError` when refused
    def request_stop(self, reason: str) -> None: ...

    def request_restart(self, unit: str) -> None: ...

    def follow_log(self, unit: str, max_buffer: int) -> MemoryObjectReceiveStream[LogLine] | None: ...

    async def signal_unit(self, unit: str, signum: int) -> None: ...
