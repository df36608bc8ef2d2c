"""The results contract: `results.json` in a job's log directory (docs/results.md).

One `Point` per concurrency level a benchmark measured, in srtd's words whatever tool
measured it.  Like the journal, the format is a contract: fields are added, never
renamed or re-typed without bumping `RESULTS_FORMAT`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from srtd.results._where import RESULTS_FORMAT


class Stat(BaseModel):
    """One latency distribution, milliseconds; a value the tool did not report is null."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float | None = None
    p50: float | None = None
    p99: float | None = None


class Point(BaseModel):
    """What one run at one concurrency measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int | None = None
    requests_sent: int | None = None
    requests_succeeded: int | None = None
    requests_failed: int | None = None
    duration_s: float | None = None
    output_tokens: int | None = None
    output_tok_s: float | None = None
    output_tok_s_per_gpu: float | None = None
    request_throughput: float | None = None  # successful requests per second
    ttft_ms: Stat | None = None
    tpot_ms: Stat | None = None
    itl_ms: Stat | None = None
    e2e_ms: Stat | None = None
    source: str = ""  # the file this point was read from


class Verdict(BaseModel):
    """The validity gate's decision: `ok`, or the reason and the point that failed it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    gated: bool = True
    reason: str | None = None
    point: int | None = None  # index into `points`


class AfterReplacement(BaseModel):
    """The benchmark ran again after a spare replaced a lost node (docs/nodes.md): its points were
    measured after the replacement; the interrupted attempts' own results are kept at `interrupted`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: tuple[str, ...]  # the lost nodes, each replaced by a spare while the benchmark ran
    interrupted: tuple[str, ...] = ()  # where each interrupted attempt's results were set aside

    def describe(self) -> str:
        kept = f"; the interrupted results are kept at {', '.join(self.interrupted)}" if self.interrupted else ""
        return f"measured after a replacement of node {', '.join(self.nodes)}{kept}"


class Results(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = RESULTS_FORMAT
    job: str
    job_id: str
    variant: str | None = None
    sweep: dict[str, str] = Field(default_factory=dict)  # the variant's parameter values
    unit: str
    reader: str
    path: str  # where the benchmark's own results were read
    gpus: int = 0
    exit_code: int | None = None  # the benchmark's
    points: tuple[Point, ...] = ()
    verdict: Verdict
    replacement: AfterReplacement | None = None  # absent from the JSON unless a replacement came

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @model_serializer(mode="wrap")
    def _without_replacement(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("replacement", "") is None:
            del data["replacement"]
        return data
