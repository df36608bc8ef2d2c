"""Events: every state change of a job, and the job state as a fold of them.

One `Event` per change, appended to `<log_dir>/events.jsonl` (one JSON object per
line) and kept in memory.  `JobState.apply` folds events into the state that
`srtd attach` shows, so a live snapshot, a stream and a replay of a finished job's
journal are one code path.  The journal format is a contract (docs/events.md).

Like `srtd.unit`, this module imports nothing of srtd's.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, model_validator

JOURNAL_FORMAT = 1


class UnitState(StrEnum):
    PENDING = "pending"  # in the plan, not yet considered
    WAITING = "waiting"  # waiting for its `after` edges
    STARTING = "starting"  # launched, readiness not yet passed
    READY = "ready"  # readiness passed (or no probe)
    EXITED = "exited"  # the process ended; what happens next follows
    BACKOFF = "backoff"  # waiting out the restart delay
    STOPPING = "stopping"  # teardown sent SIGTERM
    STOPPED = "stopped"  # ended for good, not a failure
    FAILED = "failed"  # ended for good, a failure


class JobState(StrEnum):
    STARTING = "starting"  # units are being started
    RUNNING = "running"  # every non-terminal unit is ready; terminal units run
    STOPPING = "stopping"  # teardown in progress
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # stopped by a signal


FINAL_UNIT_STATES = frozenset({UnitState.STOPPED, UnitState.FAILED})
FINAL_JOB_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class EventFacts(TypedDict, total=False):
    """What an event may say beyond its unit and state: the keyword arguments of `emit`."""

    exit_code: int | None
    signal: int | None
    reason: str | None
    attempt: int | None
    pid: int | None
    detail: dict[str, Any] | None


class _Detail(BaseModel):
    """The `detail` keys a reader of the journal relies on, with their types (docs/events.md).

    Checked when an event is read, so a journal line with `"units": 5` or a state no
    release of srtd wrote is a skipped line, never a crash of the fold or the timeline.
    Other keys pass as they are.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    job: str | None = None
    job_id: str | None = None
    units: list[str] | None = None
    nodes: dict[str, str] | None = None
    tiers: dict[str, int] | None = None
    log: str | None = None
    step: str | None = None
    seconds: Annotated[float, Field(allow_inf_nan=False)] | None = None
    after: list[str] | None = None
    result: dict[str, Any] | None = None
    node: dict[str, Any] | None = None  # node events: preflight, loss, replacement (docs/events.md)


class Event(BaseModel):
    """One state change.  `unit` is None for job-level events."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Bounds a reader checks (a journal is read back by timeline, attach --replay and
    # collectors): finite times, sequence numbers, exit codes and signals as the OS has them.
    seq: Annotated[int, Field(ge=0)]
    ts: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    unit: str | None = None  # None: a job-level event (omitted from the JSON line)
    state: str  # a UnitState for units, a JobState for the job
    prev: str | None = None
    exit_code: Annotated[int, Field(ge=-255, le=255)] | None = None
    signal: Annotated[int, Field(ge=0, le=128)] | None = None
    reason: str | None = None
    attempt: Annotated[int, Field(ge=0)] | None = None
    pid: Annotated[int, Field(ge=0, le=1 << 32)] | None = None
    detail: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _known_states(self) -> Event:
        states = UnitState if self.unit is not None else JobState
        if self.state not in states.__members__.values():  # the fold needs it; `prev` is only shown
            kind = "unit" if self.unit is not None else "job"
            raise ValueError(f"{self.state!r} is not a {kind} state ({', '.join(states)})")
        if self.detail is not None:
            _Detail.model_validate(self.detail)
        return self

    def to_line(self) -> str:
        return self.model_dump_json(exclude_none=True) + "\n"

    @classmethod
    def from_line(cls, line: str) -> Event:
        return cls.model_validate_json(line)


class UnitView(BaseModel):
    """What is known about one unit after folding its events."""

    name: str
    node: str | None = None  # from the job's `starting` event (`detail.nodes`)
    tier: int | None = None  # teardown tier, from `detail.tiers` of the same event
    state: UnitState = UnitState.PENDING
    attempt: int = 0
    restarts: int = 0
    pid: int | None = None
    step: str | None = None  # the Slurm step (`<job>.<step>`) of the attempt, `detail.step` of `starting`
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    started_at: float | None = None  # first launch
    ready_at: float | None = None  # first readiness
    ended_at: float | None = None
    ready_seconds: float | None = None  # launch -> ready of the latest ready attempt
    log: str | None = None  # the attempt's log file (`detail.log` of `starting`)
    waiting_on: list[str] = Field(default_factory=list)  # edges not yet holding, while waiting
    updated_at: float | None = None  # time of the unit's latest event


class JobView(BaseModel):
    """The job as a fold of its events."""

    name: str | None = None  # from the first event's detail
    job_id: str | None = None
    state: JobState = JobState.STARTING
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    reason: str | None = None
    seq: int = 0
    units: dict[str, UnitView] = Field(default_factory=dict)

    def apply(self, event: Event) -> None:
        self.seq = event.seq
        if event.unit is None:
            self._apply_job(event)
        else:
            self._apply_unit(event)

    def _apply_job(self, event: Event) -> None:
        self.state = JobState(event.state)
        if self.started_at is None:
            self.started_at = event.ts
        if self.state in FINAL_JOB_STATES:
            self.ended_at = event.ts
            self.exit_code = event.exit_code
        if event.reason is not None:
            self.reason = event.reason
        detail = event.detail or {}
        if "job" in detail:
            self.name = detail["job"]
            self.job_id = detail.get("job_id")
        moved = detail.get("node")  # a node event: the units a spare took over are there now
        if isinstance(moved, dict) and isinstance(moved.get("spare"), str) and moved.get("what") == "lost":
            for unit in moved.get("units") or ():
                if isinstance(unit, str):
                    self.units.setdefault(unit, UnitView(name=unit)).node = moved["spare"]
        for key in ("nodes", "tiers"):
            for unit, value in (detail.get(key) or {}).items():
                view = self.units.setdefault(unit, UnitView(name=unit))
                if key == "nodes":
                    view.node = value
                else:
                    view.tier = value

    def _apply_unit(self, event: Event) -> None:
        assert event.unit is not None
        view = self.units.setdefault(event.unit, UnitView(name=event.unit))
        view.state = UnitState(event.state)
        view.updated_at = event.ts
        detail = event.detail or {}
        view.waiting_on = list(detail.get("after", [])) if view.state is UnitState.WAITING else []
        if view.state is UnitState.STARTING and "log" in detail:
            view.log = detail["log"]
        if view.state is UnitState.STARTING:
            view.step = detail.get("step")
        if view.state is UnitState.READY and "seconds" in detail:
            view.ready_seconds = detail["seconds"]
        if event.attempt is not None:
            view.restarts = max(view.restarts, event.attempt)
            view.attempt = event.attempt
        if event.pid is not None:
            view.pid = event.pid
        if view.state is UnitState.STARTING and view.started_at is None:
            view.started_at = event.ts
        if view.state is UnitState.READY and view.ready_at is None:
            view.ready_at = event.ts
        if view.state in (UnitState.EXITED, *FINAL_UNIT_STATES):
            if event.exit_code is not None or event.signal is not None:
                # how this attempt ended, not an earlier one
                view.exit_code = event.exit_code
                view.signal = event.signal
            view.ended_at = event.ts
        if event.reason is not None:
            view.reason = event.reason

    @classmethod
    def fold(cls, events: list[Event], unit_names: list[str] | None = None) -> JobView:
        view = cls(units={n: UnitView(name=n) for n in unit_names or []})
        for event in events:
            view.apply(event)
        return view
