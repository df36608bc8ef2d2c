"""Jobs as a client sees them: what a job's journal says, and `srtd ps`'s list.

`srtd ps` lists this node's live sockets and, where Slurm's tools are, this user's
jobs that srtd submitted (`squeue --me`, picked by the comment mark srtd gives them,
see `srtd.launch`), each with srtd's own stage read from its journal when the log
directory is readable from here.

The journal is `<log dir>/events.jsonl` (`JOURNAL_NAME`); a job's state is the fold
of its events.  These readers never raise for a journal that is missing, unreadable
or half written: a client asks "what do we know", and nothing is an answer.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srtd._journal_file import JOURNAL_NAME, read_journal
from srtd._value import value_class
from srtd.attach._paths import gone_pid, is_live, pointer_facts, read_pointer, read_record, sockets
from srtd.events import FINAL_JOB_STATES, Event, JobView, UnitState

if TYPE_CHECKING:
    from srtd.attach._client import RunningJob


def journal_events(log_dir: Path) -> list[Event] | None:
    """The journal's events (lines that are not events left out), or None when it cannot be read."""
    try:
        return read_journal(log_dir / JOURNAL_NAME, [])
    except (OSError, ValueError):
        return None


def journal_view(log_dir: Path) -> JobView | None:
    """The job's state folded from its journal, or None when there is no readable journal."""
    events = journal_events(log_dir)
    if not events:
        return None
    order = list((events[0].detail or {}).get("units", []))
    return JobView.fold(events, order)


def journal_end(log_dir: Path) -> tuple[str, int] | None:
    """The job's final state and exit code, once its journal has them."""
    for event in reversed(journal_events(log_dir) or []):
        if event.unit is None and event.state in FINAL_JOB_STATES:
            return str(event.state), int(event.exit_code or 0)
    return None


# ---------------------------------------------------------------- jobs on the cluster


@value_class
class ListedJob:
    """One row of `srtd ps`: a job of this user on the cluster, or a local job of this node."""

    job_id: str
    name: str
    state: str  # Slurm's state, lower case (pending, running, completed, ...); "running" for a local job
    log_dir: str | None
    stage: str | None = None  # srtd's own state from the journal or the socket (starting, running, ...)
    ready: int | None = None  # units ready, of `units`, when the journal says
    units: int | None = None
    variant: str | None = None
    nodes: str | None = None
    batch_host: str | None = None  # None: a job of this node, found by its socket
    reason: str | None = None  # why a pending job waits
    started: float | None = None
    socket: str | None = None  # the attach socket (on the batch host), when known

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _stage(view: JobView | None) -> tuple[str | None, int | None, int | None]:
    if view is None:
        return None, None, None
    ready = sum(1 for u in view.units.values() if u.state == UnitState.READY)
    return str(view.state), ready, len(view.units)


def cluster_jobs() -> list[ListedJob]:
    """This user's jobs that srtd submitted (the comment mark), as Slurm and their journals say."""
    from srtd.launch import user_jobs

    listed = []
    for job in user_jobs():
        mark = job.mark
        if mark is None:
            continue
        log_dir = mark.get("log_dir") if isinstance(mark.get("log_dir"), str) else None
        view = journal_view(Path(log_dir)) if log_dir else None
        stage, ready, units = _stage(view)
        if job.ended and stage is not None and stage not in FINAL_JOB_STATES:
            stage = DEAD  # Slurm ended the job, and its srtd never journaled the end: it was killed
        pointer = read_pointer(Path(log_dir)) if log_dir and stage not in (*FINAL_JOB_STATES, DEAD) else None
        listed.append(
            ListedJob(
                job_id=job.job_id,
                name=str(mark.get("name") or job.name),
                state=job.state.lower(),
                stage=stage,
                ready=ready,
                units=units,
                variant=mark.get("variant") if isinstance(mark.get("variant"), str) else None,
                nodes=job.nodes or None,
                batch_host=job.batch_host or None,
                reason=job.reason or None if job.state == "PENDING" else None,
                started=view.started_at if view is not None else None,
                log_dir=log_dir,
                socket=str(pointer) if pointer is not None else None,
            )
        )
    return listed


def local_job(job: RunningJob) -> ListedJob:
    view = journal_view(Path(job.log_dir))
    _, ready, units = _stage(view)
    return ListedJob(
        job.job_id, job.name, "running", job.log_dir, job.state, ready, units, started=job.started, socket=job.socket
    )


DEAD = "dead"  # `srtd ps`'s state of a job whose srtd is gone without ending its journal


def dead_jobs() -> list[ListedJob]:
    """This node's jobs whose srtd is gone (killed) and left its socket: nothing answers on it and
    the srtd its record names runs no more.  What each got to is its journal's last word."""
    found = []
    for path in sockets():
        facts = read_record(path)
        pid = gone_pid(facts)
        if facts is None or pid is None or is_live(path):
            continue
        log_dir = facts.get("log_dir") if isinstance(facts.get("log_dir"), str) else None
        view = journal_view(Path(log_dir)) if log_dir else None
        stage, ready, units = _stage(view)
        found.append(
            ListedJob(
                job_id=str(facts.get("job_id")),
                name=(view.name if view is not None and view.name else "?"),
                state=DEAD,
                log_dir=log_dir,
                stage=stage,
                ready=ready,
                units=units,
                reason=f"its srtd, pid {pid}, is gone",
                started=view.started_at if view is not None else None,
                socket=str(path),
            )
        )
    return found


def gone_note(log_dir: Path, view: JobView) -> str | None:
    """For a replay: why a journal that does not end will not end (its srtd is gone), if so."""
    if view.state in FINAL_JOB_STATES:
        return None
    pid = gone_pid(pointer_facts(log_dir))
    return None if pid is None else f"{DEAD}: its srtd, pid {pid}, is gone"


def list_jobs(*, cluster: bool = True) -> list[ListedJob]:
    """`srtd ps`: this node's live sockets and dead jobs, and (`cluster`, where Slurm is) this user's
    srtd jobs on the cluster."""
    from srtd.attach._client import running_jobs

    local = {job.job_id: local_job(job) for job in running_jobs()}
    local.update({job.job_id: job for job in dead_jobs() if job.job_id not in local})
    if not cluster or shutil.which("squeue") is None:
        return list(local.values())
    remote = cluster_jobs()
    seen = {job.job_id for job in remote}
    return [*remote, *(job for job_id, job in local.items() if job_id not in seen)]
