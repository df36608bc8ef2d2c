"""`srtd results --plot`: throughput per GPU against median TPOT and against concurrency.

matplotlib is the optional extra `srtd[plots]`; without it `MissingPlotting` says how to get it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from srtd._files import write_target
from srtd.errors import FileRefused, UsageError
from srtd.results._table import Row

SIZE_INCHES = (12.0, 5.0)
DPI = 100  # a PNG is SIZE_INCHES * DPI pixels: 1200 x 500
INSTALL_HINT = "--plot needs matplotlib: pip install 'srtd[plots]'"


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both lower TPOT (x) and higher throughput (y)."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox <= x and oy >= y) and (ox < x or oy > y) for j, (ox, oy) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def _throughput(row: Row, per_gpu: bool) -> float | None:
    return row.point.output_tok_s_per_gpu if per_gpu else row.point.output_tok_s


def plot(rows: Sequence[Row], path: Path) -> Path:
    """Write the picture (PNG or SVG, from the suffix)."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise UsageError(f"--plot {path}: the file must end in .png or .svg")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    per_gpu = any(r.point.output_tok_s_per_gpu is not None for r in rows)
    ylabel = "output tok/s per GPU" if per_gpu else "output tok/s"
    fig, (left, right) = plt.subplots(1, 2, figsize=SIZE_INCHES, dpi=DPI)
    measured = [(r, r.point.tpot_ms.p50 if r.point.tpot_ms else None, _throughput(r, per_gpu)) for r in rows]
    xy = [(r, x, y) for r, x, y in measured if x is not None and y is not None]
    left.scatter([x for _, x, _ in xy], [y for _, _, y in xy], color="tab:blue", label="point")
    front = pareto([(x, y) for _, x, y in xy])
    if front:
        left.plot([xy[i][1] for i in front], [xy[i][2] for i in front], "o-", color="tab:red", label="Pareto front")
    for r, x, y in xy:
        left.annotate(_label(r), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    left.set(xlabel="median TPOT (ms)", ylabel=ylabel, title=f"{ylabel} vs median TPOT")
    left.legend(loc="best")
    by_c = sorted((r.point.concurrency, y) for r, _, y in measured if r.point.concurrency is not None and y is not None)
    right.plot([c for c, _ in by_c], [y for _, y in by_c], "o-", color="tab:green")
    right.set(xlabel="concurrency", ylabel=ylabel, title=f"{ylabel} vs concurrency")
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
    fig.tight_layout()
    picture = io.BytesIO()
    fig.savefig(picture, format=fmt, dpi=DPI)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_target(path, picture.getvalue(), error=FileRefused)  # a link, FIFO or device there: refused
    return path


def _label(row: Row) -> str:
    if row.sweep:
        return ",".join(f"{k}={v}" for k, v in sorted(row.sweep.items()))
    return f"c={row.point.concurrency}"
