"""What a client accepts from a job's socket: every message checked before anything uses it.

The client believes nothing a peer sends (a socket can be anyone's, a relay can break):
each line is bounded (`MAX_MESSAGE`), decoded with its depth bounded (`decode_frame`) and
then checked against the shape of its `type`, so the commands that read `snapshot["units"]`
or `message["event"]["seq"]` get what they expect or one `AttachError` naming the socket.
"""

from __future__ import annotations

from typing import Any

from srtd import _shape as s
from srtd.attach._protocol import BadFrame, decode_frame, view_of
from srtd.errors import printable
from srtd.events import EVENT

MAX_UNITS = 100_000  # units in one snapshot: a job of 10,000 nodes of 8 workers fits
MAX_SAID = 500  # characters of a job's own message quoted in an error line


def _message(required: dict[str, s.Spec] | None = None, **optional: s.Spec) -> s.Obj:
    """A message's shape: its `type`, the fields it must and may have; others pass."""
    return s.Obj(required={"type": s.Str(), **(required or {})}, optional=optional, extra="allow")


_TEXT = s.Nullable(s.Str())
KINDS: dict[str, s.Obj] = {
    # `protocol` is compared by the client: another version is its own error
    "hello": _message(
        job_id=_TEXT,
        name=_TEXT,
        state=_TEXT,
        started=s.Nullable(s.Num()),
        log_dir=_TEXT,
        socket=_TEXT,
        pid=s.Nullable(s.Int()),
    ),
    "snapshot": _message(units=s.ListOf(s.DictOf(s.AnyValue()), max_length=MAX_UNITS)),
    "event": _message({"event": EVENT}),
    "ok": _message({"cmd": s.Str()}, unit=_TEXT, signal=_TEXT),
    "tail": _message({"unit": s.Str(), "log": s.Str(), "lines": s.ListOf(s.Str())}),
    "line": _message({"unit": s.Str(), "text": s.Str()}),
    "end": _message({"reason": s.Str()}),
    "overflow": _message({"message": s.Str()}, last_seq=s.Nullable(s.Int())),
    "error": _message({"error": s.Str(), "message": s.Str()}),
}


def said(text: object) -> str:
    """A job's own words in one of our error lines: one line, at most `MAX_SAID` characters."""
    line = printable(str(text))
    return line if len(line) <= MAX_SAID else line[:MAX_SAID] + "..."


def _why(kind: str, error: s.ShapeError) -> str:
    where = ".".join(str(part) for part in error.loc)
    return f"a {kind} message whose {where or 'value'} is wrong: {error.msg}"


def read_message(line: bytes) -> dict[str, Any]:
    """One line from a job (with its newline) -> the message, or `BadFrame` saying why not."""
    message = decode_frame(line)
    kind = message.get("type")
    shape = KINDS.get(kind) if isinstance(kind, str) else None
    if shape is None:
        raise BadFrame(f"unknown message type {said(repr(kind))[:60]}")
    try:
        s.check(shape, message)
        if kind == "snapshot":
            view_of(message)
    except s.ShapeError as e:
        raise BadFrame(_why(str(kind), e)) from None
    return message
