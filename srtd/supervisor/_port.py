"""The narrow port through which a unit sees its job.

A `UnitRunner` holds a `JobPort`, never the `Job`: what a unit may read of the job
(the clock, the HTTP client, whether the job is stopping, the state of its peers)
and what it may ask of it (launch, record an event, fail the job, watch a log,
restart its group) is listed here and nowhere else.  Control verbs (`srtd attach`'s
restart and signal) reach a unit through its own methods, so the job keeps no
back door into a runner either.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from srtd.events import Event, UnitState
from srtd.launch import Handle
from srtd.supervisor._clock import Clock
from srtd.supervisor._tail import Tailer
from srtd.unit import Condition, Unit

if TYPE_CHECKING:
    from srtd.supervisor._unit import Verdict


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

    # -- state and events
    def emit(self, unit: str, state: UnitState, **fields: Any) -> Event: ...

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

    # -- multi-node groups restart together
    def restart_group(self, origin: str, reason: str, delay: float) -> None: ...

    async def group_relaunch(self, unit: str) -> None: ...
