"""The validity gate, and `collect`: what the supervisor calls once a benchmark has ended.

A benchmark that exits 0 but measured nothing must not count as a success: no results
where it promised them, a point with no successful request or no output token, or a
point where more requests failed than succeeded, fails the job (docs/results.md).
"""

from __future__ import annotations

from pathlib import Path

from srtd._files import write_under
from srtd.errors import FileRefused
from srtd.results._readers import Reading, read, sweep_values
from srtd.results._schema import Point, Results, Verdict
from srtd.results._where import RESULTS_NAME, resolve
from srtd.unit import ResultsSpec


def _label(point: Point, index: int) -> str:
    return f"concurrency {point.concurrency}" if point.concurrency is not None else f"point {index + 1}"


def point_problem(point: Point) -> str | None:
    """Why this point measured nothing, or None.  Numbers a tool did not report are not judged."""
    sent = point.requests_sent if point.requests_sent is not None else "?"
    if point.requests_succeeded == 0:
        return f"0 of {sent} requests succeeded"
    if point.output_tokens == 0:
        return f"0 output tokens from {point.requests_succeeded} successful requests"
    if (
        point.requests_failed is not None
        and point.requests_succeeded is not None
        and point.requests_failed > point.requests_succeeded
    ):
        return f"{point.requests_failed} of {sent} requests failed, only {point.requests_succeeded} succeeded"
    return None


def judge(reading: Reading, spec: ResultsSpec) -> Verdict:
    problem: str | None = reading.problem
    index: int | None = None
    if problem is None and not reading.points:
        problem = "no point measured"
    if problem is None:
        for i, point in enumerate(reading.points):
            why = point_problem(point)
            if why is not None:
                problem, index = f"{_label(point, i)}: {why}", i
                break
    if problem is None:
        return Verdict(ok=True, gated=spec.gate)
    reason = f"the benchmark measured nothing: {problem}"
    return Verdict(ok=not spec.gate, gated=spec.gate, reason=reason, point=index)


def collect(
    spec: ResultsSpec,
    log_dir: Path,
    *,
    job: str,
    job_id: str,
    variant: str | None,
    unit: str,
    exit_code: int | None,
) -> Results:
    """Read the benchmark's own files into the contract and judge them (blocking file I/O)."""
    path = resolve(spec, log_dir)
    reading = read(spec.reader, path, spec.gpus)
    return Results(
        job=job,
        job_id=job_id,
        variant=variant,
        sweep=sweep_values(variant),
        unit=unit,
        reader=spec.reader,
        path=str(path),
        gpus=spec.gpus,
        exit_code=exit_code,
        points=reading.points,
        verdict=judge(reading, spec),
    )


def write_results(results: Results, log_dir: Path) -> Path:
    """`results.json`, replaced atomically (a reader never sees half a file)."""
    target = log_dir / RESULTS_NAME
    write_under(log_dir, target, results.model_dump_json(indent=2) + "\n", error=FileRefused)
    return target
