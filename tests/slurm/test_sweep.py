"""`srtd sweep` on the dev cluster: a six-point toy campaign, two jobs at a time.

One point's node is killed under it (infrastructure: resubmitted once with the node
excluded, then measured); one point's worker exits at start (configuration: not retried,
reported with its post-mortem's line).  Then: the same command submits nothing, an added
point alone is submitted, and Ctrl-C leaves the jobs in squeue for the next run to follow.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.command import SRTD, srtd_env
from tests.slurm.conftest import ROOT, job_state, journal, wait_for
from tests.slurm.node_loss import kill_node, mark_down, restore

pytestmark = pytest.mark.usefixtures("slurm")

RECIPE = ROOT / "recipes" / "slurm-dev" / "toy-sweep.yaml"
SETTINGS = ROOT / "scripts" / "slurm-dev-sweep.srtslurm.yaml"
DELAYS = "delay: [0.2, 0.2, 0.2, 0.2, 0.2, 0.2]"
CONCURRENCIES = "concurrency: [1, 2, 3, 4, 5, 6]"
QUEUED = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def recipe(tmp_path: Path, token: str, extra: int = 0) -> Path:
    """The repo's toy sweep, named after the test, point concurrency=3 broken, `extra` points added."""
    text = RECIPE.read_text().replace("name: toy-sweep-slurm", f"name: sweep-{token}")
    # added points load for 5 s: still running when the test presses Ctrl-C
    delays = ["0.2", "0.2", "never", "0.2", "0.2", "0.2"] + ["5"] * extra
    concurrencies = [str(c) for c in range(1, 7 + extra)]
    text = text.replace(DELAYS, f"delay: [{', '.join(delays)}]")
    text = text.replace(CONCURRENCIES, f"concurrency: [{', '.join(concurrencies)}]")
    path = tmp_path / "toy-sweep.yaml"
    path.write_text(text)
    return path


def key(token: str, concurrency: int, delay: str = "0.2") -> str:
    return f"sweep-{token}[concurrency={concurrency},delay={delay}]"


def start(tmp_path: Path, path: Path) -> subprocess.Popen[str]:
    """`srtd sweep --json` in the background, its output into files (a long run must never fill a pipe)."""
    argv = [*SRTD, "sweep", str(path), "--campaign", str(tmp_path / "campaign"), "--cluster-config", str(SETTINGS)]
    argv += ["--max-running", "2", "--retries", "1", "--json", "--poll", "0.5"]
    out = (tmp_path / "sweep.out").open("w")
    err = (tmp_path / "sweep.err").open("w")
    with out, err:
        return subprocess.Popen(argv, cwd=tmp_path, env=srtd_env(drop=()), stdout=out, stderr=err, text=True)


def finish(proc: subprocess.Popen[str], tmp_path: Path, timeout: float = 600) -> tuple[int, dict[str, Any], str]:
    proc.wait(timeout=timeout)
    out, err = (tmp_path / "sweep.out").read_text(), (tmp_path / "sweep.err").read_text()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines, out + err
    return proc.returncode, lines[-1], err


def manifest(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "campaign" / "campaign.json"
    return json.loads(path.read_text()) if path.exists() else {"points": {}}


def jobs(tmp_path: Path) -> list[dict[str, Any]]:
    return [j for p in manifest(tmp_path)["points"].values() for j in p["jobs"]]


class QueueWatch:
    """The most jobs named `name` that squeue listed at once, sampled until stopped."""

    def __init__(self, name: str) -> None:
        self.name, self.most, self._stop = name, 0, threading.Event()
        self.excluded: dict[str, str] = {}  # job id: its excluded nodes, as squeue said
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            done = subprocess.run(
                ["squeue", "--noheader", f"--name={self.name}", "--format=%i %T %x"],
                capture_output=True,
                text=True,
                check=False,
            )
            listed = [line.split() for line in done.stdout.splitlines() if line.strip()]
            self.most = max(self.most, sum(1 for row in listed if row[1] in QUEUED))
            self.excluded.update({row[0]: row[2] for row in listed if len(row) == 3})
            time.sleep(0.2)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


@pytest.fixture
def cluster_restored() -> Iterator[None]:
    yield
    restore()


def _kill_point_node(tmp_path: Path, token: str) -> tuple[str, str]:
    """Once point concurrency=1 runs, its node dies: (job id, node)."""

    def running() -> tuple[str, str] | None:
        point = manifest(tmp_path)["points"].get(key(token, 1))
        if not point or not point["jobs"]:
            return None
        job = point["jobs"][0]
        log_dir = Path(job["log_dir"])
        if not (log_dir / "events.jsonl").exists():
            return None
        if not any(e.get("state") == "running" and e.get("unit") is None for e in journal(log_dir)):
            return None
        return job["job_id"], job_state(job["job_id"])["NodeList"]

    job_id, node = wait_for("point concurrency=1 to run", running, timeout=240)
    kill_node(node, job_id)
    mark_down(node)
    return job_id, node


def test_a_campaign_is_measured_retried_reported_and_idempotent(
    tmp_path: Path, token: str, cluster_restored: None
) -> None:
    watch = QueueWatch(f"sweep-{token}")
    proc = start(tmp_path, recipe(tmp_path, token))
    lost_job, node = _kill_point_node(tmp_path, token)
    code, final, err = finish(proc, tmp_path)
    most = watch.stop()
    restore()

    assert code == 1, err  # EXIT_SWEEP_UNMEASURED: one point did not measure
    assert most <= 2
    assert final["final"] is True
    assert final["counts"] == {"measured": 5, "configuration": 1}
    points = {p["key"]: p for p in final["points"]}

    # the killed point: infrastructure, resubmitted once with its node excluded, then measured
    lost = manifest(tmp_path)["points"][key(token, 1)]["jobs"]
    assert [j["outcome"] for j in lost] == ["infrastructure", "measured"]
    assert lost[0]["job_id"] == lost_job
    assert lost[0]["blame"] == [node]
    assert lost[1]["exclude"] == [node]
    assert watch.excluded[lost[1]["job_id"]] == node  # as squeue listed the job
    assert points[key(token, 1)]["retried"] == 1

    # the broken point: configuration, not retried, its post-mortem's reason line
    broken = manifest(tmp_path)["points"][key(token, 3, "never")]["jobs"]
    # not retried after its configuration failure (an infrastructure end before it would be the
    # killed node's, had the partition put both jobs there)
    assert [j["outcome"] for j in broken][-1] == "configuration"
    assert [j["outcome"] for j in broken].count("configuration") == 1
    postmortem = (Path(broken[0]["log_dir"]) / "postmortem.txt").read_text().splitlines()
    reason = next(line for line in postmortem if line.startswith("reason: ")).removeprefix("reason: ")
    assert points[key(token, 3, "never")]["why"] == reason
    assert "agg_0" in reason

    # the same command again: nothing submitted, the same end
    before = [j["job_id"] for j in jobs(tmp_path)]
    code, again, err = finish(start(tmp_path, recipe(tmp_path, token)), tmp_path)
    assert code == 1, err
    assert [j["job_id"] for j in jobs(tmp_path)] == before
    assert again["counts"] == final["counts"]

    # one point added: only it is submitted
    code, added, err = finish(start(tmp_path, recipe(tmp_path, token, extra=1)), tmp_path)
    assert code == 1, err
    new = [j for j in jobs(tmp_path) if j["job_id"] not in before]
    assert len(new) == 1
    assert manifest(tmp_path)["points"][key(token, 7, "5")]["jobs"][0]["job_id"] == new[0]["job_id"]
    assert added["counts"] == {"measured": 6, "configuration": 1}

    # Ctrl-C leaves the running jobs in squeue; a second sweep follows them on
    before = [j["job_id"] for j in jobs(tmp_path)]
    proc = start(tmp_path, recipe(tmp_path, token, extra=3))
    queued = wait_for("two new jobs to run", lambda: _running_new(tmp_path, before), timeout=120)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    err = (tmp_path / "sweep.err").read_text()
    assert proc.returncode == 130, err
    assert "2 jobs left in the queue" in err
    for job_id in queued:
        assert job_state(job_id).get("JobState") in QUEUED
    code, followed, err = finish(start(tmp_path, recipe(tmp_path, token, extra=3)), tmp_path)
    assert code == 1, err
    after = [j for j in jobs(tmp_path) if j["job_id"] not in before]
    assert [j["job_id"] for j in after] == queued  # followed, not submitted again
    assert followed["counts"] == {"measured": 8, "configuration": 1}


def _running_new(tmp_path: Path, before: list[str]) -> list[str] | None:
    new = [j["job_id"] for j in jobs(tmp_path) if j["job_id"] not in before]
    if len(new) == 2 and all(job_state(j).get("JobState") == "RUNNING" for j in new):
        return new
    return None
