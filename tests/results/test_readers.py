"""The readers and the gate on files in each tool's own format."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from srtd.results import Point, Reading, judge, read, sweep_values
from srtd.results._plot import pareto
from srtd.unit import ResultsSpec

DATA = Path(__file__).parent / "data"
SA_BENCH = DATA / "sa-bench_isl_128_osl_128"


def test_sa_bench_result_files_become_points_sorted_by_concurrency() -> None:
    reading = read("sa-bench", SA_BENCH, gpus=8)
    assert reading.problem is None
    assert [p.concurrency for p in reading.points] == [4, 16]  # the .pytorch.json copy is skipped
    for point in reading.points:
        own = json.loads(Path(point.source).read_text())
        assert point.requests_sent == own["num_prompts"]
        assert point.requests_succeeded == own["completed"]
        assert point.requests_failed == sum(1 for e in own["errors"] if e)
        assert point.duration_s == own["duration"]
        assert point.output_tokens == own["total_output_tokens"]
        assert point.output_tok_s == own["output_throughput"]
        assert point.output_tok_s_per_gpu == round(own["output_throughput"] / 8, 3)
        assert point.request_throughput == own["request_throughput"]
        for ours, theirs in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", "e2el")):
            stat = getattr(point, ours)
            assert (stat.mean, stat.p50, stat.p99) == (
                own[f"mean_{theirs}_ms"],
                own[f"median_{theirs}_ms"],
                own[f"p99_{theirs}_ms"],
            )
    assert reading.points[1].requests_failed == 2


def test_srtd_shape_reads_toy_bench_output(tmp_path: Path) -> None:
    doc = {
        "concurrency": 4,
        "requests": 20,
        "succeeded": 19,
        "errors": 1,
        "duration_s": 1.5,
        "output_tokens": 304,
        "output_tokens_per_s": 202.667,
        "requests_per_s": 12.667,
        "ttft_ms": {"avg": 5.0, "p50": 4.0, "p99": 9.0},
        "latency_ms": {"avg": 50.0, "p50": 49.0, "p99": 70.0},
        "tpot_ms": {"avg": None, "p50": None, "p99": None},
    }
    (tmp_path / "benchmark.json").write_text(json.dumps(doc))
    (point,) = read("srtd", tmp_path / "benchmark.json", gpus=0).points
    assert (point.concurrency, point.requests_sent, point.requests_succeeded, point.requests_failed) == (4, 20, 19, 1)
    assert (point.output_tokens, point.output_tok_s, point.output_tok_s_per_gpu) == (304, 202.667, None)
    assert point.ttft_ms is not None
    assert (point.ttft_ms.mean, point.ttft_ms.p99) == (5.0, 9.0)
    assert point.e2e_ms is not None
    assert point.e2e_ms.p50 == 49.0
    assert point.tpot_ms is None  # all-null statistics are "not reported"


def test_srtd_shape_with_points_and_aiperf_levels(tmp_path: Path) -> None:
    (tmp_path / "many.json").write_text(json.dumps({"points": [{"concurrency": 1}, {"concurrency": 2}]}))
    assert [p.concurrency for p in read("srtd", tmp_path / "many.json", 0).points] == [1, 2]
    levels = {"levels": [{"concurrency": 8, "requests": 10, "errors": 2, "ttft_p50_ms": 3.5, "itl_avg_ms": 1.25}]}
    (tmp_path / "aiperf.json").write_text(json.dumps(levels))
    (point,) = read("srtd", tmp_path / "aiperf.json", 0).points
    assert (point.requests_sent, point.requests_succeeded, point.requests_failed) == (10, 8, 2)
    assert point.ttft_ms is not None
    assert point.ttft_ms.p50 == 3.5
    assert point.itl_ms is not None
    assert point.itl_ms.mean == 1.25


def test_rollup_reads_mlperf_runs(tmp_path: Path) -> None:
    rollup = {
        "benchmark_type": "mlperf",
        "runs": [
            {
                "throughput_toks": 900.0,
                "request_throughput": 3.0,
                "ttft_mean_ms": 20.0,
                "ttft_p99_ms": 40.0,
                "tpot_mean_ms": 6.0,
                "completed_requests": 30,
                "metrics": {"performance": {"samples_issued": 30, "samples_failed": 0, "duration_s": 10.0}},
            }
        ],
    }
    (tmp_path / "benchmark-rollup.json").write_text(json.dumps(rollup))
    (point,) = read("rollup", tmp_path / "benchmark-rollup.json", gpus=4).points
    assert (point.requests_sent, point.requests_succeeded, point.requests_failed) == (30, 30, 0)
    assert (point.output_tok_s, point.output_tok_s_per_gpu, point.duration_s) == (900.0, 225.0, 10.0)


def test_missing_and_broken_files_are_problems_not_exceptions(tmp_path: Path) -> None:
    assert read("srtd", tmp_path / "nothing.json", 0).problem == f"no results at {tmp_path / 'nothing.json'}"
    (tmp_path / "bad.json").write_text("{not json")
    problem = read("srtd", tmp_path / "bad.json", 0).problem
    assert problem is not None
    assert problem.startswith(f"cannot read {tmp_path / 'bad.json'}: ")
    assert read("sa-bench", tmp_path / "no-dir", 0).problem == f"no results at {tmp_path / 'no-dir'}"
    assert read("nope", tmp_path, 0).problem == "no results reader 'nope' (known: srtd, sa-bench, rollup)"


SPEC = ResultsSpec(reader="srtd", path="benchmark.json")


@pytest.mark.parametrize(
    ("point", "reason"),
    [
        (
            Point(concurrency=4, requests_sent=20, requests_succeeded=0, requests_failed=20),
            "0 of 20 requests succeeded",
        ),
        (
            Point(concurrency=4, requests_sent=20, requests_succeeded=20, output_tokens=0),
            "0 output tokens from 20 successful requests",
        ),
        (
            Point(concurrency=4, requests_sent=20, requests_succeeded=9, requests_failed=11),
            "11 of 20 requests failed, only 9 succeeded",
        ),
    ],
)
def test_the_gate_names_the_point_and_the_numbers(point: Point, reason: str) -> None:
    good = Point(concurrency=1, requests_sent=5, requests_succeeded=5, requests_failed=0, output_tokens=50)
    verdict = judge(Reading((good, point)), SPEC)
    assert (verdict.ok, verdict.point) == (False, 1)
    assert verdict.reason == f"the benchmark measured nothing: concurrency 4: {reason}"
    opted_out = judge(Reading((good, point)), replace(SPEC, gate=False))
    assert (opted_out.ok, opted_out.gated, opted_out.reason) == (True, False, verdict.reason)


def test_the_gate_passes_real_numbers_and_fails_nothing() -> None:
    assert judge(read("sa-bench", SA_BENCH, 8), SPEC).ok
    assert judge(Reading(()), SPEC).reason == "the benchmark measured nothing: no point measured"
    assert judge(Reading((), "no results at /x"), SPEC).reason == "the benchmark measured nothing: no results at /x"


def test_sweep_values_and_pareto() -> None:
    assert sweep_values("concurrency=4,max_running_requests=16") == {"concurrency": "4", "max_running_requests": "16"}
    assert sweep_values("stp/concurrency=8") == {"concurrency": "8"}
    assert sweep_values("base") == {}
    assert sweep_values(None) == {}
    # (TPOT, throughput): (3, 50) is beaten by (2, 60); the others trade one for the other
    assert pareto([(1.0, 10.0), (2.0, 60.0), (3.0, 50.0), (5.0, 90.0)]) == [0, 1, 3]


finite = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=30))
def test_pareto_front_is_exactly_the_undominated_points(points: list[tuple[float, float]]) -> None:
    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] <= b[0] and a[1] >= b[1] and a != b

    front = pareto(points)
    assert front == sorted(front, key=lambda i: points[i][0])
    for i, p in enumerate(points):
        dominated = any(beats(q, p) for q in points)
        assert (i in front) == (not dominated)
