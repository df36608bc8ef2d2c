"""What the collector stores, checked at the door: every value it accepts it can render back.

The contract's models (`srtd.status_api`) say the shape of a request; these subclasses add
the collector's bounds, so that a value stored with a 2xx never breaks a reader (the jobs
table, a job page, the API's GETs) later:

- the body is plain JSON: no NaN or Infinity, numbers within +-2**53, strings that are
  valid Unicode (no lone surrogates), nesting at most `MAX_DEPTH` deep;
- ids (a job id in a body or in a path) are 1 to `MAX_ID` characters of `ID_CHARS`, with
  no empty, `.` or `..` segment between slashes;
- times parse as ISO 8601 and lie in 1970 .. 2999 (UTC); exit codes fit an int32;
  `logs_url` is an http(s) URL; the free texts have length limits;
- a journal event's state is one of its kind's (a unit's or the job's), and the `detail`
  keys the job page reads have the types it reads them as.

A refusal is a 422 whose `detail` names each field (`loc`) and what is wrong with it.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from srtd.events import JobState, UnitState
from srtd.status_api import JOURNAL_BATCH, Event, IsoTime, JobCreate, JobUpdate, JournalBatch

MAX_DEPTH = 16  # nesting of a JSON body (objects and lists)
MAX_NUMBER = 2**53  # beyond, a number cannot round-trip through a float (the sweep page's charts)
MAX_ID = 256
ID_CHARS = re.compile(r"[A-Za-z0-9._:@+=,~/-]+")
MAX_NAME = 256  # job name, cluster, stage-like short texts
MAX_TEXT = 4096  # message, recipe, URL
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)
INT32 = 2**31


class BodyError(ValueError):
    """The body is not plain JSON within bounds; `loc` says where."""

    def __init__(self, loc: list[str | int], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


def parse_json(raw: bytes) -> Any:
    """The body's JSON document, checked to be plain JSON within bounds (`BodyError` if not)."""
    try:
        data = json.loads(raw)  # NaN and Infinity parse: `check_plain` refuses them with their place
    except RecursionError:
        raise BodyError([], f"nested deeper than {MAX_DEPTH}") from None
    except ValueError as err:
        raise BodyError([], f"the body is not JSON: {err}") from None
    check_plain(data, [])
    return data


def check_plain(value: Any, loc: list[str | int]) -> None:
    if len(loc) > MAX_DEPTH:
        raise BodyError(loc, f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        _check_text(value, loc)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > MAX_NUMBER:
            raise BodyError(loc, f"a number beyond +-2**53: {str(value)[:20]}...")
    elif isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise BodyError(loc, f"not a finite number within +-2**53: {value}")
    elif isinstance(value, dict):
        for key, inner in value.items():
            _check_text(key, [*loc, key])
            check_plain(inner, [*loc, key])
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            check_plain(inner, [*loc, i])


def _check_text(text: str, loc: list[str | int]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyError(loc, "not valid Unicode (a lone surrogate)") from None


# ---------------------------------------------------------------------- field types
def check_job_id(value: str) -> str:
    if not 1 <= len(value) <= MAX_ID:
        raise ValueError(f"a job id is 1 to {MAX_ID} characters, got {len(value)}")
    if not ID_CHARS.fullmatch(value):
        raise ValueError("a job id is letters, digits and ._:@+=,~/- only")
    if any(part in ("", ".", "..") for part in value.split("/")):
        raise ValueError("a job id has no empty, '.' or '..' part between slashes")
    return value


def _time_in_range(value: str) -> str:
    parsed = datetime.fromisoformat(value)  # the contract's own check ran first
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if not EARLIEST <= parsed < LATEST:
        raise ValueError(f"a time between 1970 and 2999, got {value!r}")
    return value


def _web_url(value: str | None) -> str | None:
    if value is not None and not re.match(r"https?://[^\s/?#]+", value, re.IGNORECASE):
        raise ValueError("an http:// or https:// URL")
    return value


JobId = Annotated[str, AfterValidator(check_job_id)]
Time = Annotated[IsoTime, AfterValidator(_time_in_range)]  # the contract's check, then the range
Name = Annotated[str, Field(max_length=MAX_NAME)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Url = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_web_url)]
Int32 = Annotated[int, Field(ge=-INT32, le=INT32 - 1)]


class NewJob(JobCreate):
    model_config = ConfigDict(title="JobCreate")  # the contract's name, in a refusal
    job_id: JobId
    job_name: Name
    cluster: Name | None = None
    recipe: Text | None = None
    submitted_at: Time


class JobMove(JobUpdate):
    model_config = ConfigDict(title="JobUpdate")
    updated_at: Time
    message: Text | None = None
    started_at: Time | None = None
    completed_at: Time | None = None
    exit_code: Int32 | None = None
    logs_url: Url | None = None


# ---------------------------------------------------------------------- the journal
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class _Result(BaseModel):
    """A benchmark point (`detail.result`): the fields the timeline prints, with their types."""

    model_config = ConfigDict(extra="allow")
    output_tok_s: Number | None = None
    tpot_ms: dict[str, Number | None] | None = None


class _Detail(BaseModel):
    """The `detail` keys a job page reads (the fold and the timeline), with the types it reads them as."""

    model_config = ConfigDict(extra="allow")
    job: StrictStr | None = None
    job_id: StrictStr | None = None
    units: list[StrictStr] | None = None
    nodes: dict[str, StrictStr | None] | None = None
    tiers: dict[str, StrictInt] | None = None
    after: list[StrictStr] | None = None
    log: StrictStr | None = None
    step: StrictStr | None = None
    seconds: Number | None = None
    result: _Result | None = None


def _readable(event: Event) -> Event:
    states = {s.value for s in (JobState if event.unit is None else UnitState)}
    if event.state not in states:
        kind = "the job" if event.unit is None else "a unit"
        raise ValueError(f"state {event.state!r} is not one of {kind}'s: {', '.join(sorted(states))}")
    if event.prev is not None and event.prev not in states:
        raise ValueError(f"prev {event.prev!r} is not a state")
    if event.seq > MAX_NUMBER or event.ts >= LATEST.timestamp() or (event.attempt or 0) >= INT32:
        raise ValueError("seq, ts (before 3000) or attempt out of range")
    if event.unit is not None and not 1 <= len(event.unit) <= MAX_NAME:
        raise ValueError(f"a unit name is 1 to {MAX_NAME} characters")
    try:
        _Detail.model_validate(event.detail or {})
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        raise ValueError(f"detail.{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return event


class JournalPost(JournalBatch):
    model_config = ConfigDict(title="JournalBatch")
    events: Annotated[list[Annotated[Event, AfterValidator(_readable)]], Field(min_length=1, max_length=JOURNAL_BATCH)]
