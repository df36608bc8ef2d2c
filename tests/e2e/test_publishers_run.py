"""Result publishers of real local toy jobs: the document on stdin, the journal, the exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srtd.errors import EXIT_OK, EXIT_PUBLISH
from srtd.events import Event

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "features" / "result-publishers.yaml"
MARK = "srtd-test-publisher-sleeps"

pytestmark = pytest.mark.slow


def _recipe(tmp_path: Path, publishers: str) -> Path:
    text = RECIPE.read_text()
    head = text[: text.index("reporting:\n")]
    path = tmp_path / "publish.yaml"
    path.write_text(head + "reporting:\n  publishers:\n" + publishers)
    return path


def _run(recipe: Path, log_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    argv = [sys.executable, "-m", "srtd", "run", str(recipe), "--log-dir", str(log_dir), "--plain"]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)


def _publisher_events(log_dir: Path) -> list[tuple[str, str | None]]:
    events = [Event.from_line(line) for line in (log_dir / "events.jsonl").read_text().splitlines()]
    return [
        (e.detail["publisher"]["name"], e.detail["publisher"]["outcome"])
        for e in events
        if e.unit is None and e.state == "stopping" and e.detail and isinstance(e.detail.get("publisher"), dict)
    ]


def test_a_publisher_reads_the_checked_results_and_a_missing_one_changes_nothing(tmp_path: Path) -> None:
    got = tmp_path / "published.json"
    copy = f"import shutil, sys; shutil.copyfileobj(sys.stdin, open({str(got)!r}, 'w')); print('receipt: 42')"
    recipe = _recipe(
        tmp_path,
        f"    - name: copy\n      command: [{json.dumps(sys.executable)}, -c, {json.dumps(copy)}]\n"
        "    - name: absent\n      command: [srtd-no-such-publisher]\n",
    )
    log_dir = tmp_path / "logs"
    done = _run(recipe, log_dir)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    document = json.loads(got.read_text())
    assert document["format"] == 1
    assert (document["job"], document["log_dir"]) == ("toy-result-publishers", str(log_dir))
    assert document["results"] == json.loads((log_dir / "results.json").read_text())
    assert [p["concurrency"] for p in document["results"]["points"]] == [2]
    assert (log_dir / "publish_copy.out").read_text() == "receipt: 42\n"
    assert _publisher_events(log_dir) == [("copy", "ok"), ("absent", "missing")]
    assert "'srtd-no-such-publisher' is not installed; not published" in done.stderr


def test_a_failing_publisher_fails_the_job_with_its_code_and_a_slow_one_is_killed(tmp_path: Path) -> None:
    py = json.dumps(sys.executable)
    recipe = _recipe(
        tmp_path,
        f"    - name: bad\n      command: [{py}, -c, 'import sys; sys.exit(3)']\n"
        f"    - name: slow\n      command: [{py}, -c, 'import time; time.sleep(120)', {MARK}]\n"
        "      timeout_seconds: 1\n"
        f"    - name: good\n      command: [{py}, -c, 'print(1)']\n",
    )
    log_dir = tmp_path / "logs"
    done = _run(recipe, log_dir)
    assert done.returncode == EXIT_PUBLISH, done.stdout + done.stderr
    assert _publisher_events(log_dir) == [("bad", "failed"), ("slow", "timeout"), ("good", "ok")]
    final = Event.from_line((log_dir / "events.jsonl").read_text().splitlines()[-1])
    assert (final.state, final.exit_code) == ("failed", EXIT_PUBLISH)
    assert final.reason == "results not published: publisher bad: exited with code 3 (log publish_bad.out)"
    postmortem = (log_dir / "postmortem.txt").read_text()
    assert "reason: results not published: publisher bad: exited with code 3" in postmortem
    assert "publisher slow: killed after its timeout of 1 s (log publish_slow.out)" in postmortem
    ps = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True, check=False)
    assert ps.stdout == ""  # killed with its process group, not left behind
