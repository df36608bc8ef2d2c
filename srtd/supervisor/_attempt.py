"""What an attempt's watchers and a unit's dependants speak in: how an attempt ended
(`AttemptEnd`), whether a dependency holds (`Verdict`), and an exit said in words."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from srtd._value import value_class
from srtd.launch import ExitStatus

KILL_REAP = 2.0  # real seconds to wait for a process after SIGKILL
REQUESTED = "restart requested"  # the reason of a restart asked for through `srtd attach`


def ended(status: ExitStatus) -> str:
    """`exited with exit code 3`, `was killed by SIGKILL`, `node node2 lost (...)`."""
    if status.lost is not None:
        return status.lost
    if status.signal is not None:
        return f"was {status.describe()}"
    return f"exited with {status.describe()}"


class Verdict(Enum):
    OK = "ok"
    WAIT = "wait"
    FAILED = "failed"


EndKind = Literal[
    "exit", "fatal", "not-ready", "run-timeout", "group", "unhealthy", "requested", "replaced", "disrupted"
]


@value_class
class AttemptEnd:
    kind: EndKind
    reason: str = ""
    delay: float | None = None  # group restarts: the backoff the group shares
    detail: dict[str, Any] | None = None  # journaled with the event that starts stopping it
