"""A fake Slurm for the follow loop: each point's attempts end as scripted, after a few passes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from srtd.sweep import Campaign, Facts, JobRecord, Manifest, Point, load_manifest
from srtd.sweep._slurm import SlurmView

MEASURED = Facts(slurm_state="COMPLETED", end_state="succeeded", exit_code=0, reason="benchmark exited 0", results=True)
CRASHED = Facts(
    slurm_state="FAILED", end_state="failed", exit_code=1, postmortem="agg_0 exited with code 2 before it was ready"
)


def lost(node: str) -> Facts:
    return Facts(slurm_state="FAILED", end_state="failed", exit_code=1, reason=f"agg_0 failed: node {node} lost (x)")


@dataclass
class FakeQueue:
    script: dict[str, list[Facts]]  # per point key, the end of each attempt in turn (the last repeats)
    passes: int = 2  # polls a job stays RUNNING
    submitted: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (key, job id, exclude)
    cancelled: list[str] = field(default_factory=list)
    most_queued: int = 0
    _ages: dict[str, int] = field(default_factory=dict)
    _ends: dict[str, Facts] = field(default_factory=dict)

    def submit(self, point: Point, exclude: Sequence[str]) -> tuple[str, str]:
        job_id = str(100 + len(self.submitted))
        attempt = sum(1 for k, _, _ in self.submitted if k == point.key)
        ends = self.script.get(point.key, [MEASURED])
        self._ends[job_id] = ends[min(attempt, len(ends) - 1)]
        self._ages[job_id] = 0
        self.submitted.append((point.key, job_id, list(exclude)))
        return job_id, f"/logs/{job_id}"

    def states(self, job_ids: Sequence[str]) -> dict[str, SlurmView]:
        self.most_queued = max(self.most_queued, len(job_ids))
        out = {}
        for job_id in job_ids:
            if job_id in self.cancelled:
                out[job_id] = SlurmView("CANCELLED")
                continue
            self._ages[job_id] = self._ages.get(job_id, 0) + 1
            ended = self._ages[job_id] > self.passes
            out[job_id] = SlurmView(self._ends[job_id].slurm_state or "COMPLETED" if ended else "RUNNING", ("node1",))
        return out

    def facts(self, job: JobRecord, view: SlurmView | None) -> Facts:
        if job.job_id in self.cancelled:
            return Facts(slurm_state="CANCELLED", end_state="cancelled", exit_code=143, reason="received SIGTERM")
        return self._ends[job.job_id]

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def points(*keys: str, hashes: dict[str, str] | None = None) -> list[Point]:
    return [Point(k, "toy", k, "toy.yaml", (hashes or {}).get(k, "h-" + k)) for k in keys]


def campaign(directory: Path, pts: list[Point]) -> Campaign:
    return Campaign(directory, load_manifest(directory, directory.name), pts)


def fresh(directory: Path) -> Manifest:
    return load_manifest(directory, directory.name)
