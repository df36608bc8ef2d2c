"""The report made of how a job ended (`End`, `JobResult`: srtd/supervisor/_end.py): the
console's summary, `postmortem.txt` when the job failed, the final event's detail.  Loaded
when the job ends, not before its first launch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from srtd.events import JobState, UnitState
from srtd.supervisor._console import SummaryRow
from srtd.supervisor._end import POSTMORTEM_NAME, End, JobResult
from srtd.supervisor._journal import JOURNAL_NAME
from srtd.supervisor._postmortem import UnitLog, write_postmortem
from srtd.supervisor._rows import root_cause, summary_rows
from srtd.supervisor._tail import read_tail

if TYPE_CHECKING:
    from srtd.supervisor._job import Job

# The post-mortem the final event of a failed job carries (for a collector's job page): bounded
EVENT_TAIL_LINES = 40
EVENT_LINE_CHARS = 400


def _postmortem(job: Job, end: End, rows: list[SummaryRow]) -> Path | None:
    """`postmortem.txt` of a failed job; None when it cannot be written (the job's end stands)."""
    culprit = root_cause(job.runners, end.culprit)
    failed = [r for r in job.runners.values() if r.state is UnitState.FAILED or r.name == culprit]
    try:
        return write_postmortem(
            job.log_dir / POSTMORTEM_NAME,
            job=f"{job.plan.name} (job {job.plan.job_id})",
            exit_code=end.exit_code,
            reason=end.reason,
            culprit=culprit,
            first_fatal=job.first_fatal,
            view=job.journal.view,
            rows=rows,
            logs=[UnitLog(r.name, r.log_path) for r in failed],
            events=job.journal.events,
        )
    except OSError:  # FileRefused too: a link or FIFO planted at its name
        return None


async def postmortem_detail(job: Job, end: End) -> dict[str, Any] | None:
    """The culprit of a failed job, why, and the last lines of its log: `detail.postmortem` of the
    final event, so that a reader without the log directory (a collector) can show them.
    Bounded (`EVENT_TAIL_LINES` lines of at most `EVENT_LINE_CHARS` characters); the log is read
    in a worker thread, off the event loop."""
    if end.state is not JobState.FAILED:
        return None
    culprit = root_cause(job.runners, end.culprit)
    if culprit is None:
        return None
    runner = job.runners.get(culprit)
    unit = job.journal.view.units.get(culprit)
    fatal = job.first_fatal[1] if job.first_fatal and job.first_fatal[0] == culprit else None
    lines = await anyio.to_thread.run_sync(read_tail, runner.log_path, EVENT_TAIL_LINES) if runner is not None else []
    detail: dict[str, Any] = {
        "unit": culprit,
        "reason": (unit.reason if unit is not None else None) or end.reason,
        "log": [line[:EVENT_LINE_CHARS] for line in lines],
    }
    if unit is not None and unit.exit_code is not None:
        detail["exit_code"] = unit.exit_code
    if fatal is not None:
        detail["fatal_line"] = fatal[:EVENT_LINE_CHARS]
    return detail


async def final_detail(job: Job, end: End) -> dict[str, Any] | None:
    """The final job event's detail: `end.detail`, and a failed job's `postmortem`."""
    postmortem = await postmortem_detail(job, end)
    return end.detail if postmortem is None else {**(end.detail or {}), "postmortem": postmortem}


def report(job: Job, end: End) -> JobResult:
    """The job has ended as `end` says: the post-mortem of a failure, the summary, the result."""
    view = job.journal.view
    rows = summary_rows(job.runners.values(), view)
    postmortem = _postmortem(job, end, rows) if end.state is JobState.FAILED else None
    job.console.summary(rows, f"{job.plan.name}: {end.state.value}, exit code {end.exit_code}")
    return JobResult(
        exit_code=end.exit_code,
        state=end.state,
        reason=end.reason,
        culprit=end.culprit,
        view=view.copied(),
        events=list(job.journal.events),
        log_dir=job.log_dir,
        journal=job.log_dir / JOURNAL_NAME,
        postmortem=postmortem,
    )
