"""Benchmarks: the client run once everything is ready.  One registry row per `benchmark.type`."""

from srtd.benchmarks import _sa_bench  # noqa: F401  (registers the row)
from srtd.benchmarks._rows import Benchmark, BenchmarkTarget, benchmark_row, benchmark_unit, register_benchmark

__all__ = ["Benchmark", "BenchmarkTarget", "benchmark_row", "benchmark_unit", "register_benchmark"]
