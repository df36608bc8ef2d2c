"""`srtd ps`'s Slurm rows (Slurm's list faked: the logic of what a row says)."""

from __future__ import annotations

from pathlib import Path

import pytest

from srtd.attach._jobs import cluster_jobs
from srtd.launch._queue import SlurmJob, mark_comment

EXAMPLE = Path(__file__).parent / "data" / "example.jsonl"


def _job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str, journal_lines: int) -> str | None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "events.jsonl").write_text("".join(EXAMPLE.read_text().splitlines(keepends=True)[:journal_lines]))
    comment = mark_comment(name="demo", variant=None, log_dir=str(log_dir))
    job = SlurmJob("4242", state, "demo", "me", "node1", "node1", "None", comment)
    monkeypatch.setattr("srtd.launch.user_jobs", lambda: [job])
    (row,) = cluster_jobs()
    return row.stage


@pytest.mark.parametrize(
    ("slurm", "lines", "stage"),
    [
        ("RUNNING", 13, "running"),  # srtd is there: its journal says what it does
        ("FAILED", 13, "dead"),  # Slurm ended the job, the journal never said the end: srtd was killed
        ("CANCELLED", 13, "dead"),
        ("COMPLETED", 21, "succeeded"),  # the journal's own end
    ],
)
def test_a_slurm_job_that_ended_without_its_journal_s_end_is_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm: str, lines: int, stage: str
) -> None:
    assert _job(tmp_path, monkeypatch, slurm, lines) == stage
