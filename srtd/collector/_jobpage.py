"""A job's page (`/jobs/{id}`), from `templates/job.html`: facts, units, timeline, results, metadata.

It refreshes in place on the job's revision feed (`/api/srtd/jobs/{id}/changes`), which
moves with every status update and journal batch, so a running job's units update live.
The benchmark's results are a table of rounded numbers with units (the comparison's
columns, `_compare`); the metadata and any results that are not points are definition
lists of their flattened keys.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import anyio
from starlette.requests import Request
from starlette.responses import Response

from srtd.collector._api import store_of
from srtd.collector._compare import COLUMNS, measure, records, rounded
from srtd.collector._journal_view import RENDERS, fold_in_thread
from srtd.collector._templates import render
from srtd.collector._views import sweep_of, time_to_ready, user_of, variant_of

# the results table's columns: the comparison's, less what one job's page says elsewhere
RESULT_COLUMNS = tuple(c for c in COLUMNS if c[0] not in ("series", "pareto", "status", "job_id"))
FLAT_MOST = 300  # flattened keys shown at most (metadata, results)
VALUE_CHARS = 500


def changes_feed(job_id: str) -> str:
    return "/api/srtd/jobs/" + quote(job_id, safe=":") + "/changes"


def flat(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A nested mapping as (dotted key, value as a person reads it) pairs, numbers rounded."""
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for key in sorted(value, key=str):
            if value[key] is None:  # nothing to show
                continue
            out += flat(value[key], f"{prefix}.{key}" if prefix else str(key))
            if len(out) >= FLAT_MOST:
                break
        return out[:FLAT_MOST]
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        text = ", ".join(rounded(v) for v in value)
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, sort_keys=True)
    else:
        text = rounded(value)
    return [(prefix, text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…")]


def results_of(job: dict[str, Any]) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """The results as table rows (one per point, rounded) and, for results that are no points, pairs."""
    measured = measure([job], named=False)
    rows = [{key: rounded(value) for key, value in row.items()} for row in records(measured)]
    results = job.get("benchmark_results")
    if rows or results is None:
        return rows, []
    return [], flat(results)


def _renders(request: Request) -> anyio.CapacityLimiter:
    """The app's limit on journals folded at once (made in the app's own event loop)."""
    state = request.app.state
    if getattr(state, "renders", None) is None:
        state.renders = anyio.CapacityLimiter(RENDERS)
    limiter: anyio.CapacityLimiter = state.renders
    return limiter


async def job_view(request: Request, job: dict[str, Any]) -> Response:
    store = store_of(request)
    job_id = job["job_id"]
    events = store.events(0, job_id, limit=10_000)
    journal = await fold_in_thread(store.journal_lines(job_id), _renders(request))
    rows, pairs = results_of(job)
    present = {key for row in rows for key, value in row.items() if value}
    context = {
        "title": f"job {job_id}",
        "feed": changes_feed(job_id),
        "cursor": store.revision(job_id) or 0,
        "job": job,
        "sweep": sweep_of(job),
        "variant": variant_of(job),
        "user": user_of(job),
        "ready": time_to_ready(job, events, journal.ready_seconds if journal is not None else None),
        "history": events,
        "journal": journal,
        "result_columns": [(key, header) for key, header, _ in RESULT_COLUMNS if key in present],
        "result_rows": rows,
        "result_pairs": pairs,
        "metadata": flat(job.get("metadata") or {}),
        "artifacts": flat(job.get("artifacts") or {}),
    }
    return render(request, "job.html", context)
