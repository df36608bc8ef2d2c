"""What the dashboard shows, computed from the store's rows: no HTML here.

A job's sweep and variant come from its metadata (`sweep`, `variant`; srtd sends
`variant` for a sweep point, and the sweep is then the job's name); its user from
`metadata.user`.  Time to ready is the journal's (the job's `running` event) for srtd
jobs, else the time from `started_at` to the first `benchmark` status (the frontend
gate passed).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from srtd._value import value_class
from srtd.events import Event, JobState, JobView, UnitState
from srtd.status_api import epoch

FILTERS = ("name", "user", "cluster", "status")
SORTS = ("submitted", "name", "status", "cluster", "user", "updated", "exit_code")


def sweep_of(job: dict[str, Any]) -> str | None:
    meta = job.get("metadata") or {}
    if meta.get("sweep"):
        return str(meta["sweep"])
    return str(job["job_name"]) if meta.get("variant") and job.get("job_name") else None


def variant_of(job: dict[str, Any]) -> str | None:
    value = (job.get("metadata") or {}).get("variant")
    return str(value) if value else None


def user_of(job: dict[str, Any]) -> str | None:
    value = (job.get("metadata") or {}).get("user")
    return str(value) if value else None


def _sort_key(job: dict[str, Any], sort: str) -> Any:
    value = {
        "submitted": job.get("submitted_at") or job.get("updated_at"),
        "name": job.get("job_name"),
        "status": job.get("shown_status") or job.get("status"),
        "cluster": job.get("cluster"),
        "user": user_of(job),
        "updated": job.get("updated_at"),
        "exit_code": job.get("exit_code"),
    }[sort]
    return (value is None, str(value) if value is not None else "")


def select(jobs: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
    """The jobs the table shows: each filter a case-insensitive substring (status: exact), sorted."""
    wanted = {k: query[k].strip().lower() for k in FILTERS if query.get(k, "").strip()}

    def keep(job: dict[str, Any]) -> bool:
        fields = {
            "name": f"{job.get('job_name') or ''} {job['job_id']} {sweep_of(job) or ''} {variant_of(job) or ''}",
            "user": user_of(job) or "",
            "cluster": job.get("cluster") or "",
            "status": job.get("shown_status") or job.get("status") or "",
        }
        return all((fields[k].lower() == v) if k == "status" else (v in fields[k].lower()) for k, v in wanted.items())

    sort = query.get("sort") if query.get("sort") in SORTS else "submitted"
    assert sort is not None
    descending = query.get("order", "desc" if sort in ("submitted", "updated") else "asc") == "desc"
    chosen = [j for j in jobs if keep(j)]
    chosen.sort(key=lambda j: _sort_key(j, sort), reverse=descending)
    if descending:  # unknown values last either way
        chosen.sort(key=lambda j: _sort_key(j, sort)[0])
    return chosen


@value_class(frozen=False)
class Journal:
    """An srtd job's journal, folded: the units, restarts, the culprit, time to ready."""

    events: list[Event]
    view: JobView = field(default_factory=JobView)
    culprit: str | None = None
    ready_seconds: float | None = None

    @classmethod
    def of(cls, events: list[Event]) -> Journal | None:
        if not events:
            return None
        journal = cls(events)
        for event in events:
            journal.view.apply(event)
        start = events[0].ts
        running = next((e for e in events if e.unit is None and e.state == JobState.RUNNING), None)
        journal.ready_seconds = running.ts - start if running is not None else None
        failed = [e for e in events if e.unit is not None and e.state == UnitState.FAILED]
        journal.culprit = failed[0].unit if failed else None
        return journal


def time_to_ready(job: dict[str, Any], events: list[dict[str, Any]], journal_ready: float | None) -> float | None:
    """The journal's time to ready when it has one, else the statuses' (started to benchmark)."""
    if journal_ready is not None:
        return journal_ready
    started = epoch(job.get("started_at"))
    gate = next((e for e in events if e["status"] == "benchmark"), None)
    if started is None or gate is None or gate["at"] is None:
        return None
    return max(0.0, (epoch(gate["at"]) or started) - started)
