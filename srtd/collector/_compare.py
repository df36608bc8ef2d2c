"""The comparison of sweeps and jobs: throughput per GPU against interactivity, as data.

No HTML here: the sweep and compare pages hand `chart_data` to `static/charts.js` and
`table` to their template; the downloads are `table` as CSV or JSON.

- A job's points are its `benchmark_results`, read by `srtd.results.document_points`
  (whatever format the job sent); throughput per GPU is `srtd.results.per_gpu` with the
  job's `metadata.gpus` (srtd sends it; points that carry their own keep theirs).
- Interactivity is output tokens per second per user: 1000 / median TPOT (ms), or the
  median (else mean) inter-token latency where the benchmark gave no TPOT.
- A series is a sweep (or a lone job) and the configuration its variant names, less the
  concurrency, which is what moves along the series.  Each series' Pareto front: the
  points no other point of it beats on both axes (`srtd.results.pareto`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import field, replace
from typing import Any

from srtd._value import value_class
from srtd.collector._views import sweep_of, variant_of
from srtd.results import Point, Stat, document_points, pareto, per_gpu, sweep_values

CONCURRENCY = "concurrency"


@value_class
class Measured:
    """One point of one job, with where it belongs."""

    series: str
    job_id: str
    label: str  # the point's configuration as shown: the variant, or the job
    config: dict[str, str]
    status: str
    point: Point
    pareto: bool = field(default=False, compare=False)
    watts: float | None = None  # the GPUs' mean power over the point's measurement window, when covered

    @property
    def per_watt(self) -> float | None:
        tok_s = self.point.output_tok_s
        return tok_s / self.watts if tok_s is not None and self.watts else None

    @property
    def per_gpu(self) -> float | None:
        return self.point.output_tok_s_per_gpu

    @property
    def per_user(self) -> float | None:
        point = self.point
        for stat, which in ((point.tpot_ms, "p50"), (point.itl_ms, "p50"), (point.itl_ms, "mean")):
            ms = getattr(stat, which) if stat is not None else None
            if ms is not None and ms > 0:
                return 1000.0 / float(ms)
        return None


def gpus_of(job: dict[str, Any]) -> int:
    value = (job.get("metadata") or {}).get("gpus")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def series_of(job: dict[str, Any], *, named: bool) -> str:
    """The job's series: its sweep (or name, or id) when `named`, and its configuration less concurrency."""
    config = {k: v for k, v in sweep_values(variant_of(job)).items() if k != CONCURRENCY}
    rest = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
    if not named:
        return rest or (sweep_of(job) or job.get("job_name") or job["job_id"])
    name = sweep_of(job) or job.get("job_name") or job["job_id"]
    return f"{name} {rest}" if rest else str(name)


def watts_of(job: dict[str, Any]) -> dict[int, float]:
    """Concurrency -> mean power (W) of the job's covered measurement windows (`benchmark_results.power`,
    which srtd's reporter adds from the power manifest where the job sampled power)."""
    results = job.get("benchmark_results")
    power = results.get("power") if isinstance(results, dict) else None
    windows = power.get("windows") if isinstance(power, dict) else None
    out: dict[int, float] = {}
    for window in windows if isinstance(windows, list) else []:
        if not isinstance(window, dict) or window.get("covered") is not True:
            continue
        concurrency, watts = window.get("concurrency"), window.get("mean_power_w")
        if isinstance(concurrency, int) and isinstance(watts, (int, float)) and watts > 0:
            out[concurrency] = float(watts)
    return out


def job_points(job: dict[str, Any], series: str) -> list[Measured]:
    points = per_gpu(document_points(job.get("benchmark_results")), gpus_of(job))
    variant = variant_of(job)
    config = sweep_values(variant)
    label = variant or str(job.get("job_name") or job["job_id"])
    watts = watts_of(job)
    status = str(job.get("shown_status") or job.get("status") or "")
    return [
        Measured(series, job["job_id"], label, config, status, p, watts=watts.get(p.concurrency or -1))
        for p in sorted(points, key=lambda p: (p.concurrency is None, p.concurrency or 0))
    ]


def pareto_front(xy: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both higher x and higher y, by x."""
    return pareto([(-x, y) for x, y in xy])[::-1]


def measure(jobs: Sequence[dict[str, Any]], *, named: bool) -> list[Measured]:
    """Every point of the jobs, in series order, each series' Pareto front marked."""
    measured = [m for job in jobs for m in job_points(job, series_of(job, named=named))]
    out: list[Measured] = []
    for series in dict.fromkeys(m.series for m in measured):
        members = [m for m in measured if m.series == series]
        charted = [i for i, m in enumerate(members) if m.per_user is not None and m.per_gpu is not None]
        xy = [(members[i].per_user or 0.0, members[i].per_gpu or 0.0) for i in charted]
        front = {charted[i] for i in pareto_front(xy)}
        out += [replace(m, pareto=i in front) for i, m in enumerate(members)]
    return out


def _ms(stat: Stat | None, which: str) -> float | None:
    return getattr(stat, which) if stat is not None else None


# (key, header with its unit, value of a point): the table's and the downloads' columns, key ones first
COLUMNS: tuple[tuple[str, str, Callable[[Measured], Any]], ...] = (
    ("series", "series", lambda m: m.series),
    ("point", "point", lambda m: m.label),
    ("concurrency", "conc.", lambda m: m.point.concurrency),
    ("tok_s_per_gpu", "tok/s per GPU", lambda m: m.per_gpu),
    ("tok_s_per_user", "tok/s per user", lambda m: m.per_user),
    ("tok_s", "tok/s", lambda m: m.point.output_tok_s),
    ("ttft_p50_ms", "TTFT p50 (ms)", lambda m: _ms(m.point.ttft_ms, "p50")),
    ("ttft_p99_ms", "TTFT p99 (ms)", lambda m: _ms(m.point.ttft_ms, "p99")),
    ("tpot_p50_ms", "TPOT p50 (ms)", lambda m: _ms(m.point.tpot_ms, "p50")),
    ("itl_p50_ms", "ITL p50 (ms)", lambda m: _ms(m.point.itl_ms, "p50")),
    ("itl_p99_ms", "ITL p99 (ms)", lambda m: _ms(m.point.itl_ms, "p99")),
    ("e2e_p50_ms", "e2e p50 (ms)", lambda m: _ms(m.point.e2e_ms, "p50")),
    ("e2e_p99_ms", "e2e p99 (ms)", lambda m: _ms(m.point.e2e_ms, "p99")),
    ("tok_s_per_w", "tok/s per W", lambda m: m.per_watt),
    ("power_w", "power (W)", lambda m: m.watts),
    ("requests_ok", "requests ok", lambda m: m.point.requests_succeeded),
    ("requests_sent", "sent", lambda m: m.point.requests_sent),
    ("pareto", "Pareto", lambda m: m.pareto),
    ("status", "status", lambda m: m.status),
    ("job_id", "job", lambda m: m.job_id),
)


def rounded(value: Any) -> str:
    """A number as a person reads it: three significant figures or whole, with thousands separated."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def records(measured: Sequence[Measured]) -> list[dict[str, Any]]:
    """The table's rows at full precision: the JSON and CSV downloads."""
    return [{key: get(m) for key, _, get in COLUMNS} for m in measured]


def as_csv(measured: Sequence[Measured]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([header for _, header, _ in COLUMNS])
    for row in records(measured):
        writer.writerow(["" if v is None else v for v in row.values()])
    return buffer.getvalue()


def chart_data(measured: Sequence[Measured]) -> dict[str, Any]:
    """What charts.js draws: every point with its numbers and configuration, and the series in order."""
    points = []
    for m in measured:
        row = records([m])[0]
        row["config"] = ", ".join(f"{k}={v}" for k, v in m.config.items()) or m.label
        points.append(row)
    return {"series": list(dict.fromkeys(m.series for m in measured)), "points": points}
