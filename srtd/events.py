"""Events: every state change of a job, and the job state as a fold of them.

One `Event` per change, appended to `<log_dir>/events.jsonl` (one JSON object per
line) and kept in memory.  `JobState.apply` folds events into the state that
`srtd attach` shows, so a live snapshot, a stream and a replay of a finished job's
journal are one code path.  The journal format is a contract (docs/events.md).

Plain dataclasses, checked where they are read (`Event.from_line`, `Event.from_json`)
by `srtd._shape`: `srtd ps` and `srtd attach` fold journals and snapshots and must not
import pydantic to do it (issue #36).  The collector's wire model of an event, a pydantic
model with the same fields and checks, is `srtd.status_api.Event`.

Like `srtd.unit`, this module imports nothing of srtd's but `srtd._shape`.
"""

from __future__ import annotations

import json
from dataclasses import field, fields, replace
from enum import StrEnum
from typing import Any, TypedDict

from srtd import _shape as s
from srtd._json import TooDeep, loads_bounded
from srtd._value import value_class

JOURNAL_FORMAT = 1
JOURNAL_DEPTH = 64  # objects and arrays inside each other in one journal line; srtd writes a handful


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


def known_state(unit: str | None, state: str) -> None:
    """A `ValueError` unless `state` is one of a unit's (or, with no unit, the job's)."""
    states = UnitState if unit is not None else JobState
    if state not in states.__members__.values():  # the fold needs it; `prev` is only shown
        kind = "unit" if unit is not None else "job"
        raise ValueError(f"{state!r} is not a {kind} state ({', '.join(states)})")


# The `detail` keys a reader of the journal relies on, with their types (docs/events.md):
# a journal line with `"units": 5` or a state no release of srtd wrote is a skipped line,
# never a crash of the fold or the timeline.  Other keys pass as they are.
DETAIL = s.Obj(
    optional=s.nullable(
        {
            "job": s.Str(),
            "job_id": s.Str(),
            "units": s.ListOf(s.Str()),
            "nodes": s.DictOf(s.Str()),
            "tiers": s.DictOf(s.Int()),
            "log": s.Str(),
            "step": s.Str(),
            "seconds": s.Num(),
            "after": s.ListOf(s.Str()),
            "result": s.DictOf(s.AnyValue()),
            "node": s.DictOf(s.AnyValue()),  # node events: preflight, loss, replacement (docs/events.md)
        }
    ),
    extra="allow",
)


def _readable(event: dict[str, Any]) -> None:
    """What the fold needs beyond the fields' types: a known state, a detail of known types."""
    known_state(event.get("unit"), event["state"])
    s.check(DETAIL, event.get("detail") or {}, s.JSON_WORDS)


# Bounds a reader checks (a journal is read back by timeline, attach --replay and
# collectors): finite times, sequence numbers, exit codes and signals as the OS has them.
EVENT = s.Obj(
    required={"seq": s.Int(ge=0), "ts": s.Num(ge=0), "state": s.Str()},
    optional=s.nullable(
        {
            "unit": s.Str(),
            "prev": s.Str(),
            "exit_code": s.Int(ge=-255, le=255),
            "signal": s.Int(ge=0, le=128),
            "reason": s.Str(),
            "attempt": s.Int(ge=0),
            "pid": s.Int(ge=0, le=1 << 32),
            "detail": s.DictOf(s.AnyValue()),
        }
    ),
    then=_readable,
)


@value_class(kw_only=True, slots=True)
class Event:
    """One state change.  `unit` is None for job-level events."""

    seq: int
    ts: float
    unit: str | None = None  # None: a job-level event (omitted from the JSON line)
    state: str  # a UnitState for units, a JobState for the job
    prev: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    attempt: int | None = None
    pid: int | None = None
    detail: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """The event as its JSON object: fields in their order, the unset ones left out."""
        return {f: v for f in _FIELDS if (v := getattr(self, f)) is not None}

    def to_json(self) -> str:
        return json.dumps(self.as_json(), separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def to_line(self) -> str:
        return self.to_json() + "\n"

    @classmethod
    def from_json(cls, data: Any, words: dict[str, str] = s.PYTHON_WORDS) -> Event:
        """The event a decoded JSON object holds, or `ShapeError` saying where it is wrong."""
        return cls(**s.check(EVENT, data, words))

    @classmethod
    def from_line(cls, line: str | bytes) -> Event:
        """The event of one journal line, or `ShapeError` (a `ValueError`) saying why not."""
        try:
            data = loads_bounded(line, JOURNAL_DEPTH, constants=True)  # a NaN time is refused as `ts`
        except TooDeep as e:
            raise s.ShapeError((), str(e)) from None
        except ValueError as e:
            raise s.ShapeError((), f"Invalid JSON: {e}") from None
        return cls.from_json(data, s.JSON_WORDS)


_FIELDS = tuple(f.name for f in fields(Event))


@value_class(frozen=False, slots=True)
class UnitView:
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
    waiting_on: list[str] = field(default_factory=list)  # edges not yet holding, while waiting
    updated_at: float | None = None  # time of the unit's latest event

    def as_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _UNIT_FIELDS} | {"waiting_on": list(self.waiting_on)}

    def copied(self) -> UnitView:
        return replace(self, waiting_on=list(self.waiting_on))


_UNIT_FIELDS = tuple(f.name for f in fields(UnitView))


@value_class(frozen=False, slots=True)
class JobView:
    """The job as a fold of its events."""

    name: str | None = None  # from the first event's detail
    job_id: str | None = None
    state: JobState = JobState.STARTING
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    reason: str | None = None
    seq: int = 0
    units: dict[str, UnitView] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The job's fields as a JSON object, without its units."""
        return {f: getattr(self, f) for f in _JOB_FIELDS}

    def copied(self) -> JobView:
        """A copy that later events folded into this view leave as it is."""
        return replace(self, units={name: unit.copied() for name, unit in self.units.items()})

    @classmethod
    def from_json(cls, data: dict[str, Any], units: list[Any]) -> JobView:
        """The view a snapshot carries (its job fields and its units), or `ShapeError`."""
        job = s.check(_JOB_VIEW, data)
        view = cls(**job | {"state": JobState(job.get("state", JobState.STARTING))})
        for unit in units:
            facts = s.check(_UNIT_VIEW, unit)
            item = UnitView(**facts | {"state": UnitState(facts.get("state", UnitState.PENDING))})
            view.units[item.name] = item
        return view

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


_JOB_FIELDS = tuple(f.name for f in fields(JobView) if f.name != "units")
_OPTIONAL_NUMBERS = {"started_at": s.Num(), "ended_at": s.Num(), "exit_code": s.Int()}
_JOB_VIEW = s.Obj(
    optional={
        **s.nullable({"name": s.Str(), "job_id": s.Str(), "reason": s.Str(), **_OPTIONAL_NUMBERS}),
        "state": s.OneOf(s.strings(JobState)),
        "seq": s.Int(),
    },
    extra="ignore",
)
_UNIT_VIEW = s.Obj(
    required={"name": s.Str()},
    optional={
        **s.nullable(
            {
                **_OPTIONAL_NUMBERS,
                "signal": s.Int(),
                "node": s.Str(),
                "tier": s.Int(),
                "pid": s.Int(),
                "step": s.Str(),
                "reason": s.Str(),
                "ready_at": s.Num(),
                "ready_seconds": s.Num(),
                "log": s.Str(),
                "updated_at": s.Num(),
            }
        ),
        "state": s.OneOf(s.strings(UnitState)),
        "attempt": s.Int(),
        "restarts": s.Int(),
        "waiting_on": s.ListOf(s.Str()),
    },
    extra="ignore",
)
