"""The requests srtd sends to srt-slurm's status collectors, built with the contract's models.

`POST {endpoint}/api/jobs` records a job; `PUT {endpoint}/api/jobs/{job_id}` moves
it.  The values and bodies are `srtd.status_api`'s, the models the collector
(`srtd collector`) validates with.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal
from urllib.parse import quote

from srtd._value import value_class
from srtd.status_api import JobCreate, JobUpdate, Stage, Status, iso

__all__ = ["Request", "Stage", "Status", "iso", "job_created", "job_updated"]


@value_class
class Request:
    """One request to every collector: `POST /api/jobs` or `PUT /api/jobs/<job id>`."""

    method: Literal["POST", "PUT"]
    path: str
    body: dict[str, Any]


def job_created(
    job_id: str,
    *,
    job_name: str,
    cluster: str | None,
    recipe: str | None,
    submitted_at: float,
    metadata: dict[str, Any] | None = None,
) -> Request:
    body = JobCreate(
        job_id=job_id,
        job_name=job_name,
        cluster=cluster,
        recipe=recipe,
        submitted_at=iso(submitted_at),
        metadata=dict(metadata or {}),
    )
    return Request("POST", "/api/jobs", body.model_dump(mode="json"))


def job_updated(job_id: str, status: Status, at: float, **fields: Any) -> Request:
    """A PUT: `status` and `updated_at`, plus whichever optional fields are not None."""
    values = {k: v.value if isinstance(v, StrEnum) else v for k, v in fields.items() if v is not None}
    body = JobUpdate(status=status, updated_at=iso(at), **values)
    return Request("PUT", f"/api/jobs/{quote(job_id, safe=':')}", body.model_dump(mode="json", exclude_none=True))
