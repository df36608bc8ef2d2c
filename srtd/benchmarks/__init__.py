"""Benchmarks: the client run once everything is ready.  One registry row per `benchmark.type`."""

from srtd.benchmarks import _sa_bench  # noqa: F401  (registers the rows)
from srtd.benchmarks._rows import (
    Benchmark,
    BenchmarkTarget,
    benchmark_problems,
    benchmark_row,
    benchmark_unit,
    missing_script,
    register_benchmark,
)

__all__ = [
    "Benchmark",
    "BenchmarkTarget",
    "benchmark_problems",
    "benchmark_row",
    "benchmark_unit",
    "missing_script",
    "register_benchmark",
]
