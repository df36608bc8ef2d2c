"""What the sweep reads from a real log directory: the journal's end, the post-mortem's line, results."""

from __future__ import annotations

import json
import os
from pathlib import Path

from srtd.sweep import JobRecord, Outcome, SlurmQueue, classify
from srtd.sweep._slurm import SlurmView

EXAMPLE = Path(__file__).resolve().parents[1] / "attach" / "data" / "example.jsonl"
LOST = "w0 failed: node node1 lost (slurmd at 127.0.0.2:17001 has not answered for 11 s)"


def _queue() -> SlurmQueue:
    return SlurmQueue(lambda point, exclude: ("0", "/nonexistent"))


def _ended_with(log_dir: Path, end: dict[str, object]) -> None:
    lines = EXAMPLE.read_text().splitlines()[:-1]
    lines.append(json.dumps({"seq": 21, "ts": 1767000076.01, "prev": "stopping", **end}))
    (log_dir / "events.jsonl").write_text("\n".join(lines) + "\n")


def test_a_failed_job_is_read_with_its_postmortem_line(tmp_path: Path) -> None:
    _ended_with(tmp_path, {"state": "failed", "exit_code": 1, "reason": "w0 exited 2 before ready"})
    (tmp_path / "postmortem.txt").write_text(
        "srtd post-mortem: demo (job 4242)\nstate: failed, exit code 1\nreason: w0 exited with code 2 before ready\n"
    )
    job = JobRecord(job_id="4242", recipe_hash="h", log_dir=str(tmp_path))
    facts = _queue().facts(job, SlurmView("BOOT_FAIL"))
    assert (facts.end_state, facts.exit_code, facts.postmortem) == ("failed", 1, "w0 exited with code 2 before ready")
    assert facts.results is False
    assert classify(facts).outcome is Outcome.INFRASTRUCTURE  # Slurm's BOOT_FAIL comes first


def test_a_lost_node_in_the_journal_is_blamed(tmp_path: Path) -> None:
    _ended_with(tmp_path, {"state": "failed", "exit_code": 1, "reason": LOST})
    (tmp_path / "results.json").write_text("{}")
    facts = _queue().facts(JobRecord(job_id="4242", recipe_hash="h", log_dir=str(tmp_path)), SlurmView("TIMEOUT"))
    assert facts.results is True
    assert classify(facts).outcome is Outcome.TIME_LIMIT  # partial results, never measured
    facts = _queue().facts(JobRecord(job_id="4242", recipe_hash="h", log_dir=str(tmp_path)), SlurmView("NODE_FAIL"))
    assert facts.reason == LOST


def test_a_planted_postmortem_or_journal_is_nothing_known(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "postmortem.txt")
    (tmp_path / "events.jsonl").symlink_to("/dev/zero")
    facts = _queue().facts(JobRecord(job_id="1", recipe_hash="h", log_dir=str(tmp_path)), SlurmView("PREEMPTED"))
    assert (facts.end_state, facts.postmortem) == (None, None)
    assert classify(facts).why == "Slurm: PREEMPTED"
