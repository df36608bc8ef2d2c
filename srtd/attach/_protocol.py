"""The attach protocol: newline-delimited JSON over a Unix socket (docs/attach.md).

The server greets with `{"type": "hello", "protocol": 1, ...}`; a client then sends
one request object per line and gets reply objects, one per line.  Every message is
a JSON object with a `type`; replies to a request echo its `id` when it had one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from srtd._json import TooDeep, loads_bounded
from srtd._value import value_class

if TYPE_CHECKING:
    from srtd.events import Event, JobView

PROTOCOL = 1
MAX_REQUEST = 64 * 1024  # bytes in one request line; longer ones get an error reply
# Bytes in one message line from the job: its largest are a snapshot (some hundred bytes a
# unit) and a tail (at most 256 KiB of log, escaped); a longer line ends the connection.
MAX_MESSAGE = 8 * 1024 * 1024
MAX_DEPTH = 32  # nesting of objects and arrays in any line, either way; real ones use 4
DEFAULT_TAIL = 50
MAX_TAIL = 10_000
VERBS = ("snapshot", "subscribe", "tail", "stop", "restart", "signal")


class BadFrame(ValueError):
    """A line that is not a protocol message (not JSON, not an object, nested too deep)."""


class BadRequest(BadFrame):
    """A request line the server cannot act on; the message goes back as an error."""


def decode_frame(line: bytes) -> dict[str, Any]:
    """One protocol line -> its JSON object, or `BadFrame` saying why not.

    Bounded whatever the line holds: the caller bounds its length, `loads_bounded` its
    nesting (`MAX_DEPTH`), in time linear in the line.
    """
    try:
        data = loads_bounded(line, MAX_DEPTH)
    except TooDeep as e:
        raise BadFrame(str(e)) from None
    except (UnicodeDecodeError, ValueError):
        raise BadFrame("not a JSON object") from None
    if not isinstance(data, dict):
        raise BadFrame("not a JSON object")
    return data


@value_class
class Request:
    cmd: str
    id: Any = None
    unit: str | None = None
    from_seq: int | None = None
    lines: int = DEFAULT_TAIL
    follow: bool = False
    signal: str | None = None


def encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def error(code: str, message: str, request_id: Any = None) -> dict[str, Any]:
    reply: dict[str, Any] = {"type": "error", "error": code, "message": message}
    if request_id is not None:
        reply["id"] = request_id
    return reply


def _int(data: Mapping[str, Any], key: str, default: int | None, low: int, high: int) -> int | None:
    value = data.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise BadRequest(f"{key} must be an integer from {low} to {high}")
    return value


def parse_request(line: bytes) -> Request:
    """One request line (without its newline) -> a `Request`, or `BadRequest`."""
    try:
        data = decode_frame(line)
    except BadFrame as e:
        raise BadRequest(str(e)) from None
    cmd = data.get("cmd")
    if cmd not in VERBS:
        raise BadRequest(f"unknown cmd {cmd!r}; one of {', '.join(VERBS)}")
    unit = data.get("unit")
    if cmd in ("tail", "restart", "signal") and not isinstance(unit, str):
        raise BadRequest(f"{cmd} needs a unit name")
    sig = data.get("signal")
    if cmd == "signal" and not isinstance(sig, str | int):
        raise BadRequest("signal needs a signal name or number")
    follow = data.get("follow", False)
    if not isinstance(follow, bool):
        raise BadRequest("follow must be true or false")
    request_id = data.get("id")
    if not isinstance(request_id, str | int | None) or isinstance(request_id, bool):
        raise BadRequest("id must be a string or an integer")
    return Request(
        cmd=cmd,
        id=request_id,
        unit=unit if isinstance(unit, str) else None,
        from_seq=_int(data, "from_seq", None, 0, 2**62),
        lines=_int(data, "lines", DEFAULT_TAIL, 0, MAX_TAIL) or 0,
        follow=follow,
        signal=str(sig) if sig is not None else None,
    )


# ---------------------------------------------------------------- snapshots


def snapshot_message(view: JobView, order: Sequence[str], **extra: Any) -> dict[str, Any]:
    """The folded view as one object: job fields at the top, `units` a list in plan order."""
    data = view.as_json()
    names = [n for n in order if n in view.units] + [n for n in view.units if n not in order]
    data["units"] = [view.units[n].as_json() for n in names]
    return {"type": "snapshot", **data, **extra}


def view_of(snapshot: Mapping[str, Any]) -> JobView:
    """The `JobView` a snapshot message carries (its extra keys are ignored), or `ShapeError`."""
    from srtd.events import JobView  # not for the relay, which only passes frames on

    units = snapshot.get("units", [])
    return JobView.from_json(dict(snapshot), units if isinstance(units, list) else [])


def event_message(line: str) -> bytes:
    """An event as the protocol sends it: the journal line inside `{"type": "event", ...}`."""
    return b'{"type":"event","event":' + line.rstrip("\n").encode() + b"}\n"


def event_of(message: Mapping[str, Any]) -> Event:
    from srtd.events import Event

    return Event.from_json(message["event"])
