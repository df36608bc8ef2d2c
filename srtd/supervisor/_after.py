"""After the job: hooks that run once its units are down and its results have passed the gate.

The supervisor knows no publisher.  The caller (`srtd run`) passes hooks (the result
publishers of `srtd.reporting`); after the teardown of a job that succeeded, and before
its final event, each is awaited in turn.  A hook journals what it did through `note` (a
job event in state `stopping`, docs/events.md) and may fail the job with its own exit
code; a job that already failed or was stopped runs none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from srtd._value import value_class
from srtd.events import JobState
from srtd.supervisor._end import End
from srtd.supervisor._journal import Journal
from srtd.unit import Plan


@value_class
class AfterJob:
    """What a hook is given: the plan, the log directory, and a way to journal what it did."""

    plan: Plan
    log_dir: Path
    note: Callable[[str, dict[str, Any]], None]  # (reason, detail) -> a job event


@value_class
class AfterJobFailure:
    """A hook's verdict that the job failed after all: its exit code and why."""

    exit_code: int
    reason: str
    detail: dict[str, Any]


AfterJobHook = Callable[[AfterJob], Awaitable[AfterJobFailure | None]]


async def run_after_job(hooks: Sequence[AfterJobHook], plan: Plan, log_dir: Path, journal: Journal, end: End) -> End:
    """Every hook of a job that ended well, in order; the first failure decides the end."""
    if end.state is not JobState.SUCCEEDED or not hooks:
        return end

    def note(reason: str, detail: dict[str, Any]) -> None:
        journal.emit(None, JobState.STOPPING, reason=reason, detail=detail)

    context = AfterJob(plan, log_dir, note)
    for hook in hooks:
        failure = await hook(context)
        if failure is not None and end.state is JobState.SUCCEEDED:
            end = End(JobState.FAILED, failure.exit_code, failure.reason, extra=failure.detail)
    return end


__all__ = ["AfterJob", "AfterJobFailure", "AfterJobHook", "run_after_job"]
