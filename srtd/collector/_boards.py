"""The jobs list (`/`), a sweep's page and the compare page, from templates.

The sweep and compare pages share the comparison (`templates/comparison.html`): the
charts `static/charts.js` draws from the points `_compare` measured, and the same points
as a table.  `?format=csv` or `?format=json` on either page downloads that table.  The
compare page's selection is its URL (`/compare?sweep=A&sweep=B&job=ID`), so it can be
shared; the jobs table's checkboxes submit to it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response

from srtd.collector._api import ApiError, store_of
from srtd.collector._compare import COLUMNS, Measured, as_csv, chart_data, measure, records, rounded
from srtd.collector._html import job_href, sweep_href
from srtd.collector._templates import render
from srtd.collector._views import FILTERS, SORTS, select, sweep_of, time_to_ready, user_of, variant_of
from srtd.results import sweep_values
from srtd.status_api import Status

CANCELLED = "cancelled"  # the dashboard's word for a job srtd says was stopped (its status says failed)

MAX_CHOSEN = 200  # jobs plus sweeps one compare page takes from its URL
JOB_COLUMNS = (
    ("job", "-"),
    ("name", "name"),
    ("sweep / variant", "-"),
    ("user", "user"),
    ("cluster", "cluster"),
    ("status", "status"),
    ("stage", "-"),
    ("message", "-"),
    ("submitted", "submitted"),
    ("updated", "updated"),
    ("exit", "exit_code"),
)
# the table's columns on the page (the downloads have every one of `COLUMNS`)
SHOWN = ("series", "point", "concurrency", "tok_s_per_gpu", "tok_s_per_user", "tok_s", "tok_s_per_w", "ttft_p50_ms",
         "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms", "e2e_p50_ms", "e2e_p99_ms", "requests", "pareto")  # fmt: skip
POWER_ONLY = ("tok_s_per_w",)  # shown when a point has it (the job sampled power)
FORMATS = ("csv", "json")


def _sort_header(label: str, key: str, query: dict[str, str]) -> dict[str, str]:
    if key not in SORTS:
        return {"label": label}
    current = query.get("sort", "submitted")
    order = "asc" if current == key and query.get("order") == "desc" else "desc"
    arrow = (" ▼" if query.get("order", "desc") == "desc" else " ▲") if current == key else ""
    params = {k: v for k, v in query.items() if k in FILTERS and v}
    params.update(sort=key, order=order)
    return {"label": label, "href": "/?" + urlencode(params), "arrow": arrow}


def jobs_page(request: Request) -> Response:
    store = store_of(request)
    query = dict(request.query_params)
    everything = store.jobs()
    rows = [
        {**job, "sweep": sweep_of(job), "variant": variant_of(job), "user": user_of(job)}
        for job in select(everything, query)
    ]
    context = {
        "title": "jobs",
        "feed": "/api/events",
        "cursor": store.last_seq(),
        "query": query,
        "clusters": sorted({j["cluster"] for j in everything if j.get("cluster")}),
        "statuses": [*(s.value for s in Status), CANCELLED],
        "headers": [_sort_header(label, key, query) for label, key in JOB_COLUMNS],
        "jobs": rows,
        "total": len(everything),
    }
    return render(request, "jobs.html", context)


def _cells(m: Measured, record: dict[str, Any]) -> dict[str, str]:
    cells = {key: rounded(record.get(key)) for key in SHOWN}
    ok, sent = record["requests_ok"], record["requests_sent"]
    cells["requests"] = f"{rounded(ok)}/{rounded(sent)}" if ok is not None or sent is not None else ""
    cells["point"] = m.label
    return cells


def _comparison(measured: Sequence[Measured], base: str) -> dict[str, Any]:
    """The template context of `comparison.html`: table, chart data, download links."""
    headers = {key: header for key, header, _ in COLUMNS} | {"requests": "requests ok/sent"}
    sep = "&" if "?" in base else "?"
    table = [
        {"job_id": m.job_id, "pareto": m.pareto, "cells": _cells(m, record)}
        for m, record in zip(measured, records(measured), strict=True)
    ]
    power = any(m.per_watt is not None for m in measured)
    return {
        "columns": [(key, headers[key]) for key in SHOWN if power or key not in POWER_ONLY],
        "power": power,
        "table": table,
        "chart": chart_data(measured),
        "downloads": {fmt: f"{base}{sep}format={fmt}" for fmt in FORMATS},
    }


def _download(request: Request, measured: Sequence[Measured], name: str) -> Response | None:
    """The table as a file when the URL asks for one (`format=`); None for the page."""
    fmt = request.query_params.get("format")
    if fmt is None:
        return None
    if fmt not in FORMATS:
        raise ApiError(422, f"format must be one of {', '.join(FORMATS)}", [{"loc": ["format"], "msg": fmt[:64]}])
    filename = quote(f"{name}.{fmt}", safe="")
    headers = {"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"}
    if fmt == "csv":
        return Response(as_csv(measured), media_type="text/csv; charset=utf-8", headers=headers)
    body = json.dumps({"points": records(measured)}, indent=1, ensure_ascii=False)
    return Response(body, media_type="application/json", headers=headers)


def _point_order(job: dict[str, Any]) -> tuple[Any, ...]:
    """A sweep's points by their parameters, numbers as numbers (concurrency=4 before 16)."""

    def value(text: str) -> tuple[int, float, str]:
        try:
            return (0, float(text), "")
        except ValueError:
            return (1, 0.0, text)

    values = sweep_values(variant_of(job))
    return (tuple(value(v) for _, v in sorted(values.items())), variant_of(job) or "", job["job_id"])


def sweep_view(request: Request) -> Response:
    store = store_of(request)
    name = request.path_params["sweep"]
    jobs = sorted((j for j in store.jobs() if sweep_of(j) == name), key=_point_order)
    measured = measure(jobs, named=False)
    if (download := _download(request, measured, f"sweep-{name}")) is not None:
        return download
    points = []
    for job in jobs:
        events = store.events(0, job["job_id"], limit=10_000)
        ready = time_to_ready(job, events, store.journal_ready_seconds(job["job_id"]))
        points.append({**job, "label": variant_of(job) or job["job_id"], "ready": ready})
    context = {
        "title": f"sweep {name}",
        "feed": "/api/events",
        "cursor": store.last_seq(),
        "jobs": points,
        "compare_href": "/compare?" + urlencode({"sweep": name}),
        **_comparison(measured, sweep_href(name)),
    }
    return render(request, "sweep.html", context)


def compare_view(request: Request) -> Response:
    store = store_of(request)
    sweeps = list(dict.fromkeys(request.query_params.getlist("sweep")))[:MAX_CHOSEN]
    wanted = list(dict.fromkeys(request.query_params.getlist("job")))[: MAX_CHOSEN - len(sweeps)]
    everything = store.jobs()
    by_id = {j["job_id"]: j for j in everything}
    jobs = [j for j in everything if sweep_of(j) in sweeps]
    jobs.sort(key=lambda j: (sweeps.index(sweep_of(j) or ""), _point_order(j)))
    jobs += [by_id[i] for i in wanted if i in by_id and by_id[i] not in jobs]
    measured = measure(jobs, named=True)
    if (download := _download(request, measured, "compare")) is not None:
        return download
    found = {sweep_of(j) for j in jobs}
    chosen = [("sweep", s, sweep_href(s) if s in found else None) for s in sweeps]
    chosen += [("job", i, job_href(i)) for i in wanted if i in by_id]
    params = urlencode([("sweep", s) for s in sweeps] + [("job", i) for i in wanted])
    context = {
        "title": "compare",
        "chosen": chosen,
        "missing": [s for s in sweeps if s not in found] + [i for i in wanted if i not in by_id],
        "jobs": len(jobs),
        **_comparison(measured, "/compare?" + params),
    }
    return render(request, "compare.html", context)
