"""The comparison's data (srtd/collector/_compare.py): points from what jobs sent, series, Pareto fronts."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from srtd.collector._compare import as_csv, chart_data, measure, pareto_front, records, rounded


def _point(concurrency: int, tok_s: float, tpot: float | None, **more: Any) -> dict[str, Any]:
    point: dict[str, Any] = {"concurrency": concurrency, "output_tok_s": tok_s, **more}
    if tpot is not None:
        point["tpot_ms"] = {"p50": tpot}
    return point


def _job(job_id: str, name: str, variant: str | None, results: Any, gpus: int | None = 4) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if variant:
        metadata["variant"] = variant
    if gpus is not None:
        metadata["gpus"] = gpus
    job = {"job_id": job_id, "job_name": name, "status": "completed", "metadata": metadata}
    return {**job, "benchmark_results": results}


def _contract(*points: dict[str, Any]) -> dict[str, Any]:
    return {"format": 1, "unit": "benchmark", "points": list(points)}


def test_a_sweeps_points_per_gpu_and_per_user_with_its_front() -> None:
    jobs = [
        _job("a1", "s", "concurrency=1", _contract(_point(1, 400.0, 10.0))),
        _job("a2", "s", "concurrency=2", _contract(_point(2, 720.0, 12.5))),
        _job("a4", "s", "concurrency=4", _contract(_point(4, 800.0, 40.0))),
        _job("a8", "s", "concurrency=8", _contract(_point(8, 780.0, 50.0))),  # worse on both than c=4
    ]
    measured = measure(jobs, named=False)
    assert [(m.label, m.per_gpu, m.per_user, m.pareto) for m in measured] == [
        ("concurrency=1", 100.0, 100.0, True),
        ("concurrency=2", 180.0, 80.0, True),
        ("concurrency=4", 200.0, 25.0, True),
        ("concurrency=8", 195.0, 20.0, False),
    ]
    assert {m.series for m in measured} == {"s"}  # concurrency is what moves along a series


def test_a_points_own_per_gpu_stays_and_itl_stands_in_for_tpot() -> None:
    results = _contract(_point(1, 100.0, None, output_tok_s_per_gpu=12.5, itl_ms={"mean": 8.0}))
    (only,) = measure([_job("j", "lone", None, results, gpus=None)], named=True)
    assert (only.series, only.per_gpu, only.per_user, only.label) == ("lone", 12.5, 125.0, "lone")


def test_every_benchmark_format_is_read() -> None:
    toy = {"concurrency": 2, "requests": 24, "errors": 0, "output_tokens_per_s": 96.0, "tpot_ms": {"p50": 20.0}}
    sa = {"max_concurrency": 8, "output_throughput": 640.0, "median_tpot_ms": 16.0, "num_prompts": 80, "completed": 80}
    rollup = {"runs": [{"concurrency": 16, "throughput_toks": 1600.0, "tpot_mean_ms": 25.0}]}
    jobs = [_job("t", "toy", None, toy, 2), _job("sa", "sa", None, sa, 8), _job("r", "roll", None, rollup, 16)]
    got = [(m.series, m.point.concurrency, m.per_gpu, m.per_user) for m in measure(jobs, named=True)]
    assert got == [("toy", 2, 48.0, 50.0), ("sa", 8, 80.0, 62.5), ("roll", 16, 100.0, None)]
    assert measure([_job("x", "x", None, {"nothing": "here"}), _job("y", "y", None, [1, 2])], named=True) == []


def test_series_are_sweeps_and_their_other_parameters() -> None:
    jobs = [
        _job("1", "sw", "tp=2,concurrency=1", _contract(_point(1, 10.0, 5.0))),
        _job("2", "sw", "tp=4,concurrency=1", _contract(_point(1, 10.0, 5.0))),
        _job("3", "other", "concurrency=1", _contract(_point(1, 10.0, 5.0))),
    ]
    assert [m.series for m in measure(jobs, named=True)] == ["sw tp=2", "sw tp=4", "other"]
    assert [m.series for m in measure(jobs[:2], named=False)] == ["tp=2", "tp=4"]
    data = chart_data(measure(jobs, named=True))
    assert data["series"] == ["sw tp=2", "sw tp=4", "other"]
    assert data["points"][0]["config"] == "tp=2, concurrency=1"
    json.dumps(data)  # what the page embeds


def test_the_downloads_carry_the_tables_columns_at_full_precision() -> None:
    measured = measure([_job("a", "s", "concurrency=3", _contract(_point(3, 1000.0, 3.0)), gpus=3)], named=False)
    rows = list(csv.reader(io.StringIO(as_csv(measured))))
    assert rows[0][:6] == ["series", "point", "conc.", "tok/s per GPU", "tok/s per user", "tok/s"]
    assert rows[1][:6] == ["s", "concurrency=3", "3", "333.333", "333.3333333333333", "1000.0"]
    assert records(measured)[0]["pareto"] is True
    assert [rounded(v) for v in (333.333, 12.3456, 0.01234, 1234567, None, True)] == [
        "333", "12.3", "0.0123", "1,234,567", "", "yes",
    ]  # fmt: skip


coordinates = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@given(st.lists(st.tuples(coordinates, coordinates), max_size=30))
def test_the_front_is_exactly_the_points_nothing_beats(xy: list[tuple[float, float]]) -> None:
    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] >= b[1] and a != b

    front = pareto_front(xy)
    assert sorted(front) == [i for i, p in enumerate(xy) if not any(beats(q, p) for q in xy)]
    assert [xy[i][0] for i in front] == sorted(xy[i][0] for i in front)  # drawn left to right


documents = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["points", "runs", "levels", "metrics", "ttft", "tpot_ms", "p50", "max_concurrency"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(
        st.sampled_from(["points", "runs", "levels", "metrics", "performance", "ttft", "tpot", "latency", "tpot_ms",
                         "ttft_ms", "itl_ms", "p50", "avg", "concurrency", "output_tok_s", "output_tokens_per_s",
                         "throughput_toks", "max_concurrency", "median_tpot_ms", "errors", "requests"]),
        inner, max_size=5,
    ),
    max_leaves=20,
)  # fmt: skip


@given(documents, st.one_of(st.none(), st.integers(-2, 8), st.text(max_size=3)))
@example({"runs": [{"metrics": [1]}]}, 2)  # a rollup whose objects are something else
@example({"runs": [{"metrics": {"performance": {"ttft": 3, "latency": []}}}]}, 2)
def test_whatever_a_job_sent_is_measured_without_an_error(results: Any, gpus: Any) -> None:
    """A collector takes any JSON as `benchmark_results`: its pages must read every one."""
    job = {"job_id": "j", "job_name": "n", "status": "completed", "metadata": {"gpus": gpus, "variant": "c=1"}}
    measured = measure([{**job, "benchmark_results": results}], named=True)
    json.dumps(chart_data(measured))
    as_csv(measured)
