"""One table across jobs and sweep points: what `srtd results` and the end-of-run summary show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from io import StringIO
from typing import Any

from srtd._value import value_class
from srtd.results._schema import Point, Results, Stat

COLUMNS = (
    ("concurrency", "conc"),
    ("requests", "ok/sent"),
    ("duration_s", "s"),
    ("output_tokens", "out tok"),
    ("output_tok_s", "tok/s"),
    ("output_tok_s_per_gpu", "tok/s/gpu"),
    ("ttft_p50", "TTFT p50"),
    ("ttft_p99", "TTFT p99"),
    ("tpot_p50", "TPOT p50"),
    ("itl_p50", "ITL p50"),
    ("e2e_p50", "e2e p50"),
)


@value_class
class Row:
    """One point of one job, with the job's sweep values beside it."""

    job_id: str
    variant: str | None
    sweep: dict[str, str]
    point: Point
    ok: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "variant": self.variant,
            "sweep": self.sweep,
            **self.point.model_dump(mode="json"),
        }


def rows_of(results: Sequence[Results]) -> list[Row]:
    """Every point, sorted by the sweep values (numerically where they are numbers), then concurrency."""
    rows = [Row(r.job_id, r.variant, r.sweep, p, r.verdict.ok) for r in results for p in r.points]

    def key(row: Row) -> tuple[Any, ...]:
        values = tuple(_sort_value(v) for _, v in sorted(row.sweep.items()))
        return (*values, row.point.concurrency if row.point.concurrency is not None else -1, row.job_id)

    return sorted(rows, key=key)


def _sort_value(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def _ms(stat: Stat | None, which: str) -> float | None:
    return getattr(stat, which) if stat is not None else None


def cells(point: Point) -> dict[str, str]:
    def num(value: float | int | None, digits: int = 1) -> str:
        if value is None:
            return "-"
        return str(value) if isinstance(value, int) else f"{value:.{digits}f}"

    requests = f"{num(point.requests_succeeded)}/{num(point.requests_sent)}"
    return {
        "concurrency": num(point.concurrency),
        "requests": requests,
        "duration_s": num(point.duration_s, 2),
        "output_tokens": num(point.output_tokens),
        "output_tok_s": num(point.output_tok_s),
        "output_tok_s_per_gpu": num(point.output_tok_s_per_gpu),
        "ttft_p50": num(_ms(point.ttft_ms, "p50")),
        "ttft_p99": num(_ms(point.ttft_ms, "p99")),
        "tpot_p50": num(_ms(point.tpot_ms, "p50")),
        "itl_p50": num(_ms(point.itl_ms, "p50")),
        "e2e_p50": num(_ms(point.e2e_ms, "p50")),
    }


def render(rows: Sequence[Row], title: str | None = None, width: int = 160) -> str:
    """The table as text (latencies in ms); sweep parameters and the job id are leading columns."""
    from rich.console import Console
    from rich.table import Table

    # A swept `concurrency` is already the concurrency column.
    sweep_keys = sorted(
        k
        for k in {k for r in rows for k in r.sweep}
        if not (k == "concurrency" and all(r.sweep.get(k) == str(r.point.concurrency) for r in rows))
    )
    jobs = len({r.job_id for r in rows}) > 1
    table = Table(title=title, show_edge=False)
    if jobs:
        table.add_column("job")
    for key in sweep_keys:
        table.add_column(key, justify="right")
    for _, header in COLUMNS:
        table.add_column(header, justify="right")
    for row in rows:
        values = cells(row.point)
        lead = [row.job_id] if jobs else []
        table.add_row(*lead, *(row.sweep.get(k, "-") for k in sweep_keys), *(values[c] for c, _ in COLUMNS))
    buffer = StringIO()
    Console(file=buffer, width=width, color_system=None).print(table)
    return buffer.getvalue()
