"""What a client accepts from a job's socket: every message checked before anything uses it.

The client believes nothing a peer sends (a socket can be anyone's, a relay can break):
each line is bounded (`MAX_MESSAGE`), decoded with its depth bounded (`decode_frame`) and
then checked against the shape of its `type`, so the commands that read `snapshot["units"]`
or `message["event"]["seq"]` get what they expect or one `AttachError` naming the socket.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from srtd.attach._protocol import BadFrame, decode_frame, view_of
from srtd.errors import printable
from srtd.events import Event

MAX_UNITS = 100_000  # units in one snapshot: a job of 10,000 nodes of 8 workers fits
MAX_SAID = 500  # characters of a job's own message quoted in an error line


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class _Hello(_Message):
    protocol: Any = None  # compared by the client: another version is its own error
    job_id: str | None = None
    name: str | None = None
    state: str | None = None
    started: float | None = None
    log_dir: str | None = None
    socket: str | None = None
    pid: int | None = None


class _Snapshot(_Message):
    units: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_UNITS)


class _Event(_Message):
    event: Event


class _Ok(_Message):
    cmd: str
    unit: str | None = None
    signal: str | None = None


class _Tail(_Message):
    unit: str
    log: str
    lines: list[str]


class _Line(_Message):
    unit: str
    text: str


class _End(_Message):
    reason: str


class _Overflow(_Message):
    last_seq: int | None = None
    message: str


class _Error(_Message):
    error: str
    message: str


KINDS: dict[str, type[_Message]] = {
    "hello": _Hello,
    "snapshot": _Snapshot,
    "event": _Event,
    "ok": _Ok,
    "tail": _Tail,
    "line": _Line,
    "end": _End,
    "overflow": _Overflow,
    "error": _Error,
}


def said(text: object) -> str:
    """A job's own words in one of our error lines: one line, at most `MAX_SAID` characters."""
    line = printable(str(text))
    return line if len(line) <= MAX_SAID else line[:MAX_SAID] + "..."


def _why(kind: str, error: ValidationError) -> str:
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"a {kind} message whose {where or 'value'} is wrong: {first['msg']}"


def read_message(line: bytes) -> dict[str, Any]:
    """One line from a job (with its newline) -> the message, or `BadFrame` saying why not."""
    message = decode_frame(line)
    kind = message.get("type")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise BadFrame(f"unknown message type {said(repr(kind))[:60]}")
    try:
        model.model_validate(message)
        if kind == "snapshot":
            view_of(message)
    except ValidationError as e:
        raise BadFrame(_why(str(kind), e)) from None
    return message
