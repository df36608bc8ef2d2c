"""Inline SVG charts for the sweep page: one metric across a sweep's points, no library."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT, PAD = 420, 180, 48


def _scale(value: float, low: float, high: float, size: float) -> float:
    return size / 2 if high == low else (value - low) / (high - low) * size


def metric_chart(metric: str, points: Sequence[tuple[str, float]]) -> str:
    """Points (label, value) in sweep order, joined by a line; each labelled with its value."""
    values = [v for _, v in points]
    low, high = min(0.0, *values), max(values)
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    step = inner_w / max(1, len(points) - 1)
    xy = [(PAD + i * step, HEIGHT - PAD - _scale(v, low, high, inner_h)) for i, (_, v) in enumerate(points)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    marks = []
    for (label, value), (x, y) in zip(points, xy, strict=True):
        marks.append(
            f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="4" data-label="{escape(label)}">'
            f"<title>{escape(label)}: {value:g}</title></circle>"
            f'<text x="{x:.1f}" y="{y - 8:.1f}" text-anchor="middle" class="value">{value:g}</text>'
            f'<text x="{x:.1f}" y="{HEIGHT - PAD + 16:.1f}" text-anchor="middle" class="label">{escape(label)}</text>'
        )
    axis = f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" class="axis"/>'
    return (
        f'<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(metric)}" data-metric="{escape(metric)}">'
        f'{axis}<polyline points="{line}" class="line"/>{"".join(marks)}</svg>'
        f"<figcaption>{escape(metric)}</figcaption></figure>"
    )
