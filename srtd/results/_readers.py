"""Readers: one per results format, named by a benchmark row's `ResultsSpec.reader`.

`READERS` is the table (a reader's name is compared here and nowhere else).  Each
reader turns a benchmark's own files into `Point`s, or says why it could not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from srtd._files import OUTPUT_LIMIT, read_back
from srtd._value import value_class
from srtd.results._schema import Point, Stat


@value_class
class Reading:
    points: tuple[Point, ...]
    problem: str | None = None  # set when nothing could be read (missing, unreadable)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None else None


def _mapping(value: Any) -> Mapping[str, Any]:
    """An object of a document, or an empty one where it holds anything else (a writer's mistake)."""
    return value if isinstance(value, Mapping) else {}


def _stat(mean: Any = None, p50: Any = None, p99: Any = None) -> Stat | None:
    stat = Stat(mean=_num(mean), p50=_num(p50), p99=_num(p99))
    return None if stat == Stat() else stat


def _load(path: Path) -> Any:
    """The JSON at `path`; OSError / ValueError name the file."""
    try:
        return json.loads(read_back(path, limit=OUTPUT_LIMIT, error=ValueError))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path}: {e}") from None


@value_class
class _Fields:
    """Where one format keeps a point's plain numbers: its own field names."""

    concurrency: str
    duration_s: str
    output_tokens: str
    output_tok_s: str
    request_throughput: str
    latencies: tuple[str, str, str, str]  # ttft, tpot, itl, end-to-end: the names its `dist` takes


_SRTD_FIELDS = _Fields(
    "concurrency", "duration_s", "output_tokens", "output_tokens_per_s", "requests_per_s",
    ("ttft_ms", "tpot_ms", "itl_ms", "latency_ms"),
)  # fmt: skip
_SA_BENCH_FIELDS = _Fields(
    "max_concurrency", "duration", "total_output_tokens", "output_throughput", "request_throughput",
    ("ttft", "tpot", "itl", "e2el"),
)  # fmt: skip


def _point(
    doc: Mapping[str, Any],
    fields: _Fields,
    counts: tuple[int | None, int | None, int | None],
    dist: Callable[[str], Stat | None],
    source: str,
) -> Point:
    """A point from a format's document: its counts (sent, succeeded, failed), its numbers by
    `fields`, its latency distributions through `dist`."""
    sent, succeeded, failed = counts
    ttft, tpot, itl, e2e = (dist(name) for name in fields.latencies)
    return Point(
        concurrency=_int(doc.get(fields.concurrency)),
        requests_sent=sent,
        requests_succeeded=succeeded,
        requests_failed=failed,
        duration_s=_num(doc.get(fields.duration_s)),
        output_tokens=_int(doc.get(fields.output_tokens)),
        output_tok_s=_num(doc.get(fields.output_tok_s)),
        request_throughput=_num(doc.get(fields.request_throughput)),
        ttft_ms=ttft,
        tpot_ms=tpot,
        itl_ms=itl,
        e2e_ms=e2e,
        source=source,
    )


# --------------------------------------------------------------------------- srtd's benchmark.json


def _srtd_point(doc: Mapping[str, Any], source: str) -> Point:
    """srtd-toy-bench's shape: requests / succeeded / errors, `*_ms` as {avg, p50, p99}."""

    def dist(key: str) -> Stat | None:
        value = doc.get(key)
        if not isinstance(value, Mapping):
            return None
        return _stat(value.get("avg", value.get("mean")), value.get("p50"), value.get("p99"))

    sent = _int(doc.get("requests"))
    failed = _int(doc.get("errors"))
    succeeded = _int(doc.get("succeeded"))
    if succeeded is None and sent is not None and failed is not None:
        succeeded = sent - failed
    return _point(doc, _SRTD_FIELDS, (sent, succeeded, failed), dist, source)


def _aiperf_level(level: Mapping[str, Any], source: str) -> Point:
    """srtd-aiperf's `levels`: counts from aiperf's per-request export, a few statistics."""
    sent, failed = _int(level.get("requests")), _int(level.get("errors"))
    return Point(
        concurrency=_int(level.get("concurrency")),
        requests_sent=sent,
        requests_succeeded=sent - failed if sent is not None and failed is not None else None,
        requests_failed=failed,
        output_tok_s=_num(level.get("output_tokens_per_s")),
        ttft_ms=_stat(p50=level.get("ttft_p50_ms"), p99=level.get("ttft_p99_ms")),
        itl_ms=_stat(mean=level.get("itl_avg_ms")),
        source=source,
    )


def srtd_points(doc: Mapping[str, Any], source: str) -> tuple[Point, ...]:
    """One point (srtd-toy-bench), `{"points": [...]}` of them, or srtd-aiperf's `levels`."""
    if isinstance(doc.get("points"), list):
        return tuple(_srtd_point(p, source) for p in doc["points"] if isinstance(p, Mapping))
    if isinstance(doc.get("levels"), list):
        return tuple(_aiperf_level(lv, source) for lv in doc["levels"] if isinstance(lv, Mapping))
    return (_srtd_point(doc, source),)


def read_srtd(path: Path) -> Reading:
    doc = _load(path)
    if not isinstance(doc, Mapping):
        raise ValueError(f"{path}: not a JSON object")  # noqa: TRY004 - bad data, reported as such
    return Reading(srtd_points(doc, str(path)))


# --------------------------------------------------------------------------- sa-bench


def sa_bench_point(doc: Mapping[str, Any], source: str) -> Point:
    """One `benchmark_serving.py --save-result` file (vLLM's field names)."""

    def dist(metric: str) -> Stat | None:
        return _stat(doc.get(f"mean_{metric}_ms"), doc.get(f"median_{metric}_ms"), doc.get(f"p99_{metric}_ms"))

    sent = _int(doc.get("num_prompts"))
    succeeded = _int(doc.get("completed"))
    errors = doc.get("errors")
    failed: int | None = None
    if isinstance(errors, list):
        failed = sum(1 for e in errors if e)
    elif sent is not None and succeeded is not None:
        failed = sent - succeeded
    if sent is None and succeeded is not None and failed is not None:
        sent = succeeded + failed
    return _point(doc, _SA_BENCH_FIELDS, (sent, succeeded, failed), dist, source)


def read_sa_bench(path: Path) -> Reading:
    """Every result file of the directory (not the `.pytorch.json` copies), by concurrency."""
    if not path.is_dir():
        raise FileNotFoundError(path)
    files = sorted(p for p in path.glob("*.json") if not p.name.endswith(".pytorch.json"))
    points = []
    for file in files:
        doc = _load(file)
        if isinstance(doc, Mapping):
            points.append(sa_bench_point(doc, str(file)))
    points.sort(key=lambda p: (p.concurrency is None, p.concurrency or 0, p.source))
    return Reading(tuple(points))


# --------------------------------------------------------------------------- srt-slurm's rollup


def rollup_points(runs: list[Any], source: str) -> tuple[Point, ...]:
    """srt-slurm's `benchmark-rollup.json` (mlperf): one point per entry of `runs`."""
    points = []
    for run in runs:
        if not isinstance(run, Mapping):
            continue
        perf = _mapping(_mapping(run.get("metrics")).get("performance"))
        succeeded = _int(run.get("completed_requests", perf.get("samples_completed")))
        failed = _int(perf.get("samples_failed"))
        sent = _int(perf.get("samples_issued"))
        ttft, tpot, e2e = (_mapping(perf.get(k)) for k in ("ttft", "tpot", "latency"))
        points.append(
            Point(
                concurrency=_int(run.get("concurrency")),
                requests_sent=sent,
                requests_succeeded=succeeded,
                requests_failed=failed,
                duration_s=_num(perf.get("duration_s")),
                output_tok_s=_num(run.get("throughput_toks")),
                request_throughput=_num(run.get("request_throughput")),
                ttft_ms=_stat(run.get("ttft_mean_ms"), ttft.get("median_ms"), run.get("ttft_p99_ms")),
                tpot_ms=_stat(run.get("tpot_mean_ms"), tpot.get("median_ms"), run.get("tpot_p99_ms")),
                e2e_ms=_stat(run.get("e2el_mean_ms"), e2e.get("median_ms"), e2e.get("p99_ms")),
                source=source,
            )
        )
    return tuple(points)


def read_rollup(path: Path) -> Reading:
    doc = _load(path)
    runs = doc.get("runs") if isinstance(doc, Mapping) else None
    if not isinstance(runs, list):
        raise ValueError(f"{path}: no `runs` list")  # noqa: TRY004 - bad data, reported as such
    return Reading(rollup_points(runs, str(path)))


def document_points(doc: Any, source: str = "") -> tuple[Point, ...]:
    """The points of one results document already parsed, its format told by its shape:
    srtd's own points (`results.json`, a reporter's interim `{"points": [...]}`), srt-slurm's
    rollup (`runs`), one sa-bench file, else srtd's benchmark formats.  Points that measured
    nothing are left out; anything else is no points, never an error (the collector shows
    what jobs sent it)."""
    if not isinstance(doc, Mapping):
        return ()
    listed = doc.get("points")
    if isinstance(listed, list):
        try:
            points: tuple[Point, ...] = tuple(Point.model_validate(p) for p in listed)
        except ValidationError:
            points = srtd_points(doc, source)
    elif isinstance(doc.get("runs"), list):
        points = rollup_points(doc["runs"], source)
    elif any(key in doc for key in _SA_BENCH_KEYS):
        points = (sa_bench_point(doc, source),)
    else:
        points = srtd_points(doc, source)
    return tuple(p for p in points if p.model_dump(exclude_none=True, exclude={"source"}))


_SA_BENCH_KEYS = ("max_concurrency", "output_throughput", "num_prompts")

READERS: dict[str, Callable[[Path], Reading]] = {
    "srtd": read_srtd,
    "sa-bench": read_sa_bench,
    "rollup": read_rollup,
}


def read(reader: str, path: Path, gpus: int) -> Reading:
    """The points at `path`, with throughput per GPU filled in; never raises for bad files."""
    read_one = READERS.get(reader)
    if read_one is None:
        return Reading((), f"no results reader {reader!r} (known: {', '.join(READERS)})")
    try:
        reading = read_one(path)
    except FileNotFoundError:
        return Reading((), f"no results at {path}")
    except ValueError as e:
        return Reading((), str(e))
    return Reading(per_gpu(reading.points, gpus), reading.problem)


def per_gpu(points: tuple[Point, ...], gpus: int) -> tuple[Point, ...]:
    """The points with output throughput per GPU filled in (as they were when `gpus` is unknown, 0)."""
    if gpus <= 0:
        return points
    return tuple(
        p.model_copy(update={"output_tok_s_per_gpu": round(p.output_tok_s / gpus, 3)})
        if p.output_tok_s is not None
        else p
        for p in points
    )


_SWEEP_SPLIT = re.compile(r",(?=[A-Za-z_][\w.-]*=)")


def sweep_values(variant: str | None) -> dict[str, str]:
    """`concurrency=4,mrr=16` (the last `/` part of a sweep variant's name) as a mapping."""
    if not variant:
        return {}
    label = variant.rsplit("/", 1)[-1]
    pairs = [part.split("=", 1) for part in _SWEEP_SPLIT.split(label)]
    if not all(len(p) == 2 for p in pairs):
        return {}
    return dict(pairs)
