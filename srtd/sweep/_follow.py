"""The campaign's loop: keep at most K jobs in the queue, classify what ended, retry infrastructure.

One pass: ask Slurm about the jobs still in the queue, classify those that ended
(`_classify`), submit points that need a job while fewer than K are queued, save the
manifest, show it.  It ends when no job is queued and no point needs one.

A point needs a job when it has none for its current recipe hash, when its last job for
that hash failed for infrastructure and retries are left (the new job excludes every
node its failed jobs blamed), or once under `--rerun`; never while a job of it is queued.
A new run starts a point that was cancelled or ran out of retries afresh.

A submission (sbatch --hold, freeze, release, manifest saved) runs with SIGINT, SIGTERM
and SIGHUP blocked: a signal arriving then is delivered once the job is released and in
the manifest, so no held job and no job the manifest does not know is left behind.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from srtd._value import value_class
from srtd.errors import SlurmUnreached
from srtd.sweep._classify import Outcome, classify
from srtd.sweep._manifest import JobRecord, Manifest, PointRecord, save_manifest
from srtd.sweep._slurm import Queue, SlurmView

_HELD_OFF = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@value_class(frozen=False)
class Point:
    """One sweep point of this invocation: what identifies it and what submits it."""

    key: str
    name: str
    variant: str | None
    recipe_file: str
    recipe_hash: str
    payload: Any = None  # the command's submission (a prepared `srtd submit` job)


@value_class(frozen=False)
class Campaign:
    directory: Path
    manifest: Manifest
    points: list[Point]
    since: dict[str, int] = field(default_factory=dict)  # --rerun: a point's attempts count from here

    def record(self, point: Point) -> PointRecord:
        rec = self.manifest.points.get(point.key)
        if rec is None:
            rec = PointRecord(
                name=point.name, variant=point.variant, recipe_file=point.recipe_file, recipe_hash=point.recipe_hash
            )
            self.manifest.points[point.key] = rec
        rec.recipe_hash = point.recipe_hash
        rec.recipe_file = point.recipe_file
        return rec

    def queued(self) -> list[JobRecord]:
        return [j for p in self.manifest.points.values() for j in p.jobs if j.outcome is None]

    def save(self) -> None:
        save_manifest(self.directory, self.manifest)


def attempts(campaign: Campaign, point: Point) -> list[JobRecord]:
    """The point's jobs that count now: for its current hash, since a `--rerun`."""
    rec = campaign.record(point)
    return [j for j in rec.jobs[campaign.since.get(point.key, 0) :] if j.recipe_hash == point.recipe_hash]


def needs_job(campaign: Campaign, point: Point, retries: int) -> list[str] | None:
    """The nodes to exclude when the point needs a job now, else None."""
    rec = campaign.record(point)
    if any(j.outcome is None for j in rec.jobs):
        return None
    jobs = attempts(campaign, point)
    if not jobs:
        return []
    if jobs[-1].outcome != Outcome.INFRASTRUCTURE:
        return None
    trailing = 0
    for job in reversed(jobs):
        if job.outcome != Outcome.INFRASTRUCTURE:
            break
        trailing += 1
    if trailing > retries:
        return None
    return sorted({n for j in jobs for n in j.blame})


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_OFF)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _poll(campaign: Campaign, queue: Queue) -> bool:
    """Slurm's word on every queued job; the ended ones classified.  True when anything changed."""
    from srtd.errors import LaunchError

    queued = campaign.queued()
    if not queued:
        return False
    try:
        views: dict[str, SlurmView] = queue.states([j.job_id for j in queued])
    except LaunchError:
        return False  # slurmctld away: ask again next pass
    changed = False
    for job in queued:
        view = views.get(job.job_id)
        if view is not None and not view.ended:
            if job.slurm_state != view.state:
                job.slurm_state, changed = view.state, True
            continue
        facts = queue.facts(job, view)
        verdict = classify(facts)
        job.slurm_state = facts.slurm_state
        job.end_state, job.exit_code = facts.end_state, facts.exit_code
        job.outcome, job.why, job.blame = verdict.outcome.value, verdict.why, list(verdict.blame)
        changed = True
    return changed


def _submit_some(campaign: Campaign, queue: Queue, max_running: int, retries: int) -> bool:
    submitted = False
    for point in campaign.points:
        if len(campaign.queued()) >= max_running:
            break
        exclude = needs_job(campaign, point, retries)
        if exclude is None:
            continue
        with signals_held():
            try:
                job_id, log_dir = queue.submit(point, exclude)
            except SlurmUnreached:
                return submitted  # slurmctld did not answer: nothing submitted, ask again next pass
            campaign.record(point).jobs.append(
                JobRecord(job_id=job_id, recipe_hash=point.recipe_hash, log_dir=log_dir, exclude=exclude)
            )
            campaign.save()
        submitted = True
    return submitted


def pending_points(campaign: Campaign, retries: int) -> list[Point]:
    return [p for p in campaign.points if needs_job(campaign, p, retries) is not None]


def follow(
    campaign: Campaign,
    queue: Queue,
    *,
    max_running: int,
    retries: int,
    rerun: bool = False,
    show: Callable[[Campaign], None] = lambda _: None,
    interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Campaign:
    """Until every point has measured or failed for good; the campaign, its manifest saved."""
    _poll(campaign, queue)  # jobs that ended while no `srtd sweep` was following them
    for point in campaign.points:
        rec = campaign.record(point)
        if any(j.outcome is None for j in rec.jobs):
            continue
        # a point cancelled, or out of retries for infrastructure, gets a fresh start from a new run
        if rerun or (rec.jobs and rec.jobs[-1].outcome in (Outcome.CANCELLED, Outcome.INFRASTRUCTURE)):
            campaign.since[point.key] = len(rec.jobs)
    campaign.save()
    while True:
        changed = _poll(campaign, queue)
        if changed:
            campaign.save()
        _submit_some(campaign, queue, max_running, retries)
        show(campaign)
        if not campaign.queued() and not pending_points(campaign, retries):
            return campaign
        sleep(interval)


def cancel_all(campaign: Campaign, queue: Queue, on_cancel: Callable[[str], None] = lambda _: None) -> list[str]:
    """`srtd sweep --cancel`: scancel every queued job of the campaign (they end as cancelled)."""
    done = []
    for job in campaign.queued():
        queue.cancel(job.job_id)
        on_cancel(job.job_id)
        done.append(job.job_id)
    return done


def point_status(campaign: Campaign, point: Point, retries: int) -> tuple[str, JobRecord | None]:
    """What the view shows for a point: pending, queued (Slurm's state), measured, failed ..., and its last job."""
    rec = campaign.record(point)
    if rec.jobs and rec.jobs[-1].outcome is None:
        return (rec.jobs[-1].slurm_state or "submitted").lower(), rec.jobs[-1]
    jobs = attempts(campaign, point)
    if not jobs:
        return "waiting", None
    last = jobs[-1]
    if needs_job(campaign, point, retries) is not None:
        return "retrying", last
    return str(last.outcome), last


def retried(campaign: Campaign, point: Point) -> int:
    return max(0, len(attempts(campaign, point)) - 1)


def summary(campaign: Campaign, retries: int, points: Sequence[Point] | None = None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for point in points if points is not None else campaign.points:
        status, _ = point_status(campaign, point, retries)
        counts[status] = counts.get(status, 0) + 1
    return counts
