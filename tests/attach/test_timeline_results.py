"""`srtd timeline` marks the benchmark's points (result events) on the Gantt and lists them."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from srtd.attach._timeline import ResultMark, build, render_timeline
from srtd.events import Event

T0 = 1_700_000_000.0


def ev(seq: int, dt: float, unit: str | None, state: str, prev: str | None, **fields: object) -> Event:
    return Event(seq=seq, ts=T0 + dt, unit=unit, state=state, prev=prev, **fields)


POINT = {
    "concurrency": 4,
    "requests_sent": 32,
    "requests_succeeded": 32,
    "output_tok_s": 1500.0,
    "tpot_ms": {"p50": 2.4},
}
EVENTS = [
    ev(1, 0.0, None, "starting", None, detail={"format": 1, "job": "j", "job_id": "1", "units": ["benchmark"]}),
    ev(2, 0.0, "benchmark", "starting", "pending", attempt=0, pid=5),
    ev(3, 0.0, "benchmark", "ready", "starting", attempt=0, detail={"seconds": 0.0}),
    ev(4, 0.0, None, "running", "starting"),
    ev(5, 8.0, "benchmark", "exited", "ready", exit_code=0, attempt=0),
    ev(6, 8.0, "benchmark", "stopped", "exited", exit_code=0, attempt=0),
    ev(7, 9.0, "benchmark", "stopped", "stopped", attempt=0, detail={"result": POINT, "point": 0}),
    ev(8, 10.0, None, "stopping", "running"),
    ev(9, 10.0, None, "succeeded", "stopping", exit_code=0),
]


def test_points_are_in_the_timeline_and_marked_on_the_benchmarks_bar() -> None:
    timeline = build(EVENTS)
    assert timeline.results == [ResultMark("benchmark", 9.0, POINT)]
    assert timeline.as_json()["results"] == [{"unit": "benchmark", "at": 9.0, "point": POINT}]
    buffer = StringIO()
    Console(file=buffer, width=200, color_system=None).print(render_timeline(timeline, width=20))
    text = buffer.getvalue()
    assert "  +   9.00 s  benchmark concurrency 4: 32/32 ok, 1500.0 tok/s, TPOT p50 2.4 ms" in text
    bar = next(line for line in text.splitlines() if line.lstrip().startswith("benchmark "))
    # 20 columns over 10 s: the point at 9 s is column 18
    gantt = bar.split("│")[-1].strip("\n")
    assert gantt.index("◆") == 1 + 18  # one space of cell padding
