"""The values and request bodies of srt-slurm's status collector contract (v1).

`POST {endpoint}/api/jobs` records a job; `PUT {endpoint}/api/jobs/{job_id}` moves
it.  A collector answers 422 to any status or stage not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import quote


class Status(StrEnum):
    """The stage being entered, not readiness."""

    SUBMITTED = "submitted"
    STARTING = "starting"
    WORKERS = "workers"
    FRONTEND = "frontend"
    BENCHMARK = "benchmark"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"


class Stage(StrEnum):
    STARTING = "starting"
    HEAD_INFRASTRUCTURE = "head_infrastructure"
    PREFLIGHT = "preflight"
    WORKERS = "workers"
    FRONTEND = "frontend"
    BENCHMARK = "benchmark"
    CLEANUP = "cleanup"


@dataclass(frozen=True)
class Request:
    """One request to every collector: `POST /api/jobs` or `PUT /api/jobs/<job id>`."""

    method: Literal["POST", "PUT"]
    path: str
    body: dict[str, Any]


def iso(ts: float) -> str:
    """A Unix time as ISO 8601 in UTC."""
    return datetime.fromtimestamp(ts, UTC).isoformat()


def job_created(
    job_id: str,
    *,
    job_name: str,
    cluster: str | None,
    recipe: str | None,
    submitted_at: float,
    metadata: dict[str, Any] | None = None,
) -> Request:
    body = {
        "job_id": job_id,
        "job_name": job_name,
        "cluster": cluster,
        "recipe": recipe,
        "submitted_at": iso(submitted_at),
        "metadata": dict(metadata or {}),
    }
    return Request("POST", "/api/jobs", body)


def job_updated(job_id: str, status: Status, at: float, **fields: Any) -> Request:
    """A PUT: `status` and `updated_at`, plus whichever optional fields are not None."""
    body: dict[str, Any] = {"status": status.value, "updated_at": iso(at)}
    body.update({k: v.value if isinstance(v, StrEnum) else v for k, v in fields.items() if v is not None})
    return Request("PUT", f"/api/jobs/{quote(job_id, safe=':')}", body)
