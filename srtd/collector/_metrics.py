"""`GET /metrics`: the collector's jobs in Prometheus' text format, for Grafana.

Jobs by status are counts over the whole database.  Per-job series (time to ready, unit
restarts, lost nodes, the points' throughput) are for the `RECENT` most recent jobs only,
so that a database of years of jobs does not become a scrape of millions of series.  The
same token rules as the API's reads: with a read token configured, a scrape needs it
(`Authorization: Bearer`, Prometheus' `authorization` setting).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from srtd.collector._api import require_read, store_of
from srtd.collector._compare import job_points
from srtd.collector._store import Store
from srtd.collector._views import time_to_ready
from srtd.status_api import Status

RECENT = 200  # jobs with per-job series
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATUSES = (*(s.value for s in Status), "cancelled")


def _label(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: dict[str, Any]) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in pairs.items()) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


class _Text:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, Any], float]]) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.lines += [f"{name}{_labels(labels)} {_number(value)}" for labels, value in samples]


def _job_labels(job: dict[str, Any]) -> dict[str, Any]:
    return {"job_id": job["job_id"], "job_name": job.get("job_name") or ""}


def metrics_text(store: Store) -> str:
    jobs = store.jobs()  # newest first
    text = _Text()
    counts = Counter(job["shown_status"] for job in jobs)
    text.family(
        "srtd_collector_jobs",
        "gauge",
        "Jobs in the collector's database by status (cancelled: stopped by the user, srtd's word).",
        [({"status": s}, counts.get(s, 0)) for s in (*STATUSES, *sorted(set(counts) - set(STATUSES)))],
    )
    recent = jobs[:RECENT]
    ready, restarts, lost, tok_s, per_gpu = [], [], [], [], []
    for job in recent:
        labels = _job_labels(job)
        seconds = time_to_ready(job, store.events(0, job["job_id"]), store.journal_ready_seconds(job["job_id"]))
        if seconds is not None:
            ready.append((labels, seconds))
        restarted, nodes = store.journal_counts(job["job_id"])
        restarts.append((labels, restarted))
        lost.append((labels, nodes))
        for point in job_points(job, ""):
            where = {**labels, "point": point.label, "concurrency": point.point.concurrency or ""}
            if point.point.output_tok_s is not None:
                tok_s.append((where, point.point.output_tok_s))
            if point.per_gpu is not None:
                per_gpu.append((where, point.per_gpu))
    text.family("srtd_collector_job_ready_seconds", "gauge", "Time from the job's start to ready.", ready)
    text.family("srtd_collector_job_unit_restarts", "gauge", "Unit restarts in the job's journal.", restarts)
    text.family("srtd_collector_job_node_losses", "gauge", "Nodes the job's journal says were lost.", lost)
    text.family(
        "srtd_collector_point_output_tokens_per_second", "gauge", "Output throughput of a benchmark point.", tok_s
    )
    text.family(
        "srtd_collector_point_output_tokens_per_second_per_gpu",
        "gauge",
        "Output throughput of a benchmark point per serving GPU.",
        per_gpu,
    )
    return "\n".join(text.lines) + "\n"


async def metrics(request: Request) -> Response:
    require_read(request)
    return Response(metrics_text(store_of(request)), media_type=CONTENT_TYPE)
