"""srt-slurm's status collector contract (v1), as pydantic models: the one place it is written down.

The reporter (`srtd.reporting`) builds its request bodies with these models and the
collector (`srtd.collector`) validates what it receives with the same ones, so the two
cannot drift apart.  Like `srtd.unit`, it sits at the bottom: it imports only `srtd.events`.

Unknown fields are ignored, not refused: a newer srtctl reporter may send fields this
version does not know, and a collector must keep accepting it (docs/collector.md).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from srtd import events

MAX_BODY = 1 << 20  # bytes: a collector answers 413 to a larger body


class Status(StrEnum):
    """The stage being entered, not readiness."""

    SUBMITTED = "submitted"
    STARTING = "starting"
    WORKERS = "workers"
    FRONTEND = "frontend"
    BENCHMARK = "benchmark"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"


FINAL_STATUSES = frozenset({Status.COMPLETED, Status.FAILED, Status.TIMEOUT})


class Stage(StrEnum):
    STARTING = "starting"
    HEAD_INFRASTRUCTURE = "head_infrastructure"
    PREFLIGHT = "preflight"
    WORKERS = "workers"
    FRONTEND = "frontend"
    BENCHMARK = "benchmark"
    CLEANUP = "cleanup"


def _iso8601(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {value!r}") from None
    return value


# Kept as the text the reporter sent (a collector shows what it was told), checked to parse.
IsoTime = Annotated[str, AfterValidator(_iso8601)]


def iso(ts: float) -> str:
    """A Unix time as ISO 8601 in UTC."""
    return datetime.fromtimestamp(ts, UTC).isoformat()


def epoch(text: str | None) -> float | None:
    """An ISO 8601 time as a Unix time (naive times are UTC); None stays None."""
    if text is None:
        return None
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class JobCreate(_Body):
    """`POST /api/jobs`: a job was submitted.  A repeated POST is harmless."""

    job_id: Annotated[str, Field(min_length=1, max_length=256)]
    job_name: str
    cluster: str | None = None
    recipe: str | None = None
    submitted_at: IsoTime
    metadata: dict[str, Any] = Field(default_factory=dict)


class JobUpdate(_Body):
    """`PUT /api/jobs/{job_id}`: the job moved.  Only `status` and `updated_at` are required."""

    status: Status
    updated_at: IsoTime
    stage: Stage | None = None
    message: str | None = None
    started_at: IsoTime | None = None
    completed_at: IsoTime | None = None
    exit_code: int | None = None
    logs_url: str | None = None
    benchmark_results: dict[str, Any] | list[Any] | None = None  # replaces the job's
    artifacts: dict[str, Any] | None = None  # merged into the job's
    metadata: dict[str, Any] | None = None  # merged into the job's


# ------------------------------------------------------------------ srtd's extension
# A route srtctl's collector does not have (it answers 404, and srtd's reporter then stops
# sending): a batch of the job's journal events (docs/events.md), so the collector holds
# each srtd job's journal.  Every event keeps its journal `seq`; a batch sent twice is
# recorded once.

JOURNAL_ROUTE = "/api/srtd/jobs/{job_id}/journal"
HEALTH_ROUTE = "/api/health"  # an srtd collector's answer carries {"srtd": {"journal": 1}}
JOURNAL_BATCH = 200  # events per request at most


class _Detail(BaseModel):
    """The `detail` keys a reader of the journal relies on, with their types (`srtd.events.DETAIL`)."""

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
    node: dict[str, Any] | None = None


class Event(BaseModel):
    """A journal event on the wire: `srtd.events.Event`'s fields and checks (`srtd.events.EVENT`)
    as a pydantic model, for the request bodies and their JSON Schema."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: Annotated[int, Field(ge=0)]
    ts: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    unit: str | None = None
    state: str
    prev: str | None = None
    exit_code: Annotated[int, Field(ge=-255, le=255)] | None = None
    signal: Annotated[int, Field(ge=0, le=128)] | None = None
    reason: str | None = None
    attempt: Annotated[int, Field(ge=0)] | None = None
    pid: Annotated[int, Field(ge=0, le=1 << 32)] | None = None
    detail: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _known_states(self) -> Event:
        events.known_state(self.unit, self.state)
        if self.detail is not None:
            _Detail.model_validate(self.detail)
        return self

    def event(self) -> events.Event:
        """The journal's own event of the same facts."""
        return events.Event(**dict(self))


class JournalBatch(_Body):
    events: Annotated[list[Event], Field(min_length=1, max_length=JOURNAL_BATCH)]
