"""How a job ended: the decision (`End`) and what `supervise()` returns (`JobResult`).  The
report made of them is srtd/supervisor/_outcome.py, loaded only once the job ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from srtd._value import value_class
from srtd.events import Event, JobState, JobView

POSTMORTEM_NAME = "postmortem.txt"


@value_class(frozen=False)
class JobResult:
    exit_code: int
    state: JobState
    reason: str | None
    culprit: str | None  # the unit that failed the job, or the terminal unit with the worst code
    view: JobView
    events: list[Event]
    log_dir: Path
    journal: Path
    postmortem: Path | None = None


@value_class
class End:
    """The job's end decision: its final state and code, and why."""

    state: JobState
    exit_code: int
    reason: str
    culprit: str | None = None
    time_limit: bool = False
    extra: dict[str, Any] | None = None  # the results gate's facts (the point that failed it)

    @property
    def detail(self) -> dict[str, Any] | None:
        """The final job event's detail: the failure's culprit, or that time ran out."""
        detail: dict[str, Any] = dict(self.extra or {})
        if self.culprit:
            detail["culprit"] = self.culprit
        if self.time_limit:
            detail["time_limit"] = True
        return detail or None
