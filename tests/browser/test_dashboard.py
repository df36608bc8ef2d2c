"""The collector's dashboard in Debian's chromium, headless, driven by Playwright.

Skipped unless SRTD_TEST_BROWSER=1 (`nox -s browser` sets it, after installing chromium
from Debian and the playwright package; no browser is ever downloaded).  Real parts
throughout: a real `srtd collector` process, real local srtd jobs reporting to it with
`units: true`, the page's own JavaScript updating it.  Screenshots go to
$SRTD_SCREENSHOTS (docs/img from the nox session).  Runs local jobs on the toy stack's
fixed ports: wrap in `flock /tmp/srtd-ports.lock` on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.browser.conftest import BROWSER_ONLY, POISON, READ, TOY_JOB_HEAD, WRITE, screenshots
from tests.collector.helpers import Running, collector_env
from tests.command import SRTD

pytestmark = BROWSER_ONLY
# A job with no fixed ports: infrastructure, two services gated on it, a terminal unit that
# runs long enough to be seen running.
JOB = (
    TOY_JOB_HEAD.replace("NAME", "browser-job")
    + """\
  - name: registry
    start: infra
    command: [python3, -u, -c, "import time; time.sleep(0.3); print('up'); time.sleep(3600)"]
    readiness: {log: {pattern: up}}
  - name: cache
    start: before_workers
    command: [python3, -u, -c, "import time; time.sleep(0.5); print('up'); time.sleep(3600)"]
    readiness: {log: {pattern: up}}
  - name: exporter
    start: before_workers
    command: [python3, -u, -c, "import time; time.sleep(0.2); print('up'); time.sleep(3600)"]
    readiness: {log: {pattern: up}}
  - name: job
    command: [python3, -c, "import time; time.sleep(6)"]
    terminal: true
reporting:
  status: {endpoint: "ENDPOINT", units: true}
"""
)


def job_env() -> dict[str, str]:
    env = {k: v for k, v in collector_env().items() if not k.startswith("SLURM_")}
    return {**env, "SRTCTL_STATUS_TOKEN": WRITE}


def test_login_then_the_jobs_table_shows_a_running_job_that_turns_completed_without_reload(
    served: Running, browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    assert "nothing yet" in page.inner_text("table.jobs")
    assert READ not in page.content()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    recipe = tmp_path / "job.yaml"
    recipe.write_text(JOB.replace("ENDPOINT", served.url))
    log_dir = tmp_path / "logs"
    argv = [*SRTD, "run", str(recipe), "--log-dir", str(log_dir), "--job-id", "browser-1"]
    job = subprocess.Popen(argv, env=job_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        row = page.locator('tr[data-job-id="browser-1"]')
        running = row.locator('[data-status]:not([data-status="completed"]):not([data-status="submitted"])')
        running.wait_for()  # the row appeared, live, in a running state
        assert running.inner_text() in ("starting", "workers", "frontend", "benchmark")
        page.wait_for_selector("#live:not([hidden])")
        page.screenshot(path=str(screenshots() / "collector-jobs-running.png"), full_page=True)
        row.locator('[data-status="completed"]').wait_for(timeout=60_000)
    finally:
        _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert page.evaluate("window.__sameDocument") is True  # updated in place, never reloaded
    assert row.locator("td").nth(11).inner_text() == "0"  # exit code (after the compare box)


def test_the_job_page_shows_the_stage_history_units_and_timeline(served: Running, browser_page: Any) -> None:
    page = browser_page
    page.click('a[href="/jobs/browser-1"]')
    page.wait_for_selector("table.units")
    units = page.locator("table.units tbody tr td:first-child").all_inner_texts()
    assert units == ["service_registry", "service_cache", "service_exporter", "service_job"]
    states = page.locator("table.units .unit-state").all_inner_texts()
    assert states == ["stopped", "stopped", "stopped", "stopped"]
    history = page.locator("table.history [data-status]").all_inner_texts()
    assert history[0] == "submitted"
    assert history[-1] == "completed"
    timeline = page.locator('.gantt-row[data-unit="service_registry"] svg')
    assert timeline.is_visible()
    rows = page.locator(".gantt-row[data-unit]").evaluate_all("rs => rs.map(r => r.dataset.unit)")
    assert rows == units  # one row per unit, in the job's order


def test_the_sweep_page_shows_every_point_and_the_failed_job_its_culprit(
    served: Running, browser_page: Any, tmp_path: Path
) -> None:
    # The demo's jobs, in a process of their own (Playwright's sync API holds this thread's loop).
    fill = (
        "import sys, anyio; from pathlib import Path; from srtd.collector._demo import fill; "
        "sys.exit(0 if anyio.run(fill, sys.argv[1], Path(sys.argv[2]), sys.argv[3], print) == 4 else 1)"
    )
    demo = subprocess.run(
        [sys.executable, "-c", fill, served.url, str(tmp_path / "demo"), WRITE],
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    page = browser_page
    page.goto(served.url + "/")
    page.locator('a[href="/sweeps/demo-toy-sweep"]').first.click()
    page.wait_for_selector("table.sweep")
    points = page.locator("table.sweep tbody tr td:first-child").all_inner_texts()
    assert points == ["concurrency=1", "concurrency=2", "concurrency=4"]
    statuses = page.locator("table.sweep [data-status]").all_inner_texts()
    assert statuses == ["completed"] * 3
    drawn = page.locator('[data-chart="throughput"] g.points circle')
    assert drawn.evaluate_all("cs => cs.map(c => c.dataset.point)") == points  # the toy's results, charted
    jobs = json.loads(page.evaluate("fetch('/api/jobs').then(r => r.text())"))["jobs"]
    failed = next(j["job_id"] for j in jobs if j["job_name"] == "demo-failing-infra")
    page.goto(f"{served.url}/jobs/{failed}")
    culprit = page.inner_text(".culprit-line")
    assert culprit == "failure culprit: service_model_cache, exit code 3: exited with exit code 3 before it was ready"
    assert "disk full" in page.inner_text(".postmortem pre.log-tail")  # its log's last lines, from the journal
    # the failed job page's screenshot is test_live_jobs's (its own job's log lines)


def test_a_poisoned_job_renders_as_text_and_runs_nothing(served: Running, browser_page: Any) -> None:
    """Markup in every text a writer stores (name, message, metadata, a unit's name, a script URL
    an older collector let in) is text on the jobs table and the job page: no script runs."""
    import sqlite3

    import httpx

    at = "2026-12-01T10:00:00+00:00"
    unit = "w<img src=x onerror=window.__pwned=3>"
    events = [
        {"seq": 1, "ts": 1_800_000_000.0, "state": "starting", "detail": {"units": [unit], "tiers": {unit: 0}}},
        {"seq": 2, "ts": 1_800_000_001.0, "unit": unit, "state": "starting", "attempt": 0},
        {"seq": 3, "ts": 1_800_000_002.0, "unit": unit, "state": "failed", "reason": POISON},
        {
            "seq": 4,
            "ts": 1_800_000_003.0,
            "state": "failed",
            "reason": POISON,
            "exit_code": 1,
            "detail": {"postmortem": {"unit": unit, "reason": POISON, "log": [POISON, "é✓"]}},
        },
    ]
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {WRITE}"}, timeout=30) as client:
        job = {"job_id": "poisoned", "job_name": POISON, "submitted_at": at, "metadata": {"sweep": POISON}}
        assert client.post("/api/jobs", json=job).status_code in (200, 201)
        moved = {"status": "failed", "updated_at": at, "message": POISON, "exit_code": 1}
        assert client.put("/api/jobs/poisoned", json={**moved, "logs_url": "https://logs.example/1"}).status_code == 200
        assert client.post("/api/srtd/jobs/poisoned/journal", json={"events": events}).status_code == 200
    with sqlite3.connect(served.stderr.parent / "c.db") as db:  # a row an older collector let in
        db.execute("UPDATE jobs SET logs_url = 'javascript:window.__pwned = 4' WHERE job_id = 'poisoned'")
    page = browser_page
    page.goto(served.url + "/")
    row = page.locator('tr[data-job-id="poisoned"]')
    assert POISON in row.inner_text()
    page.goto(served.url + "/jobs/poisoned")
    page.wait_for_selector("table.units")
    text = page.inner_text("body")
    assert POISON in text  # the name and the message, as written
    assert unit in text
    assert page.inner_text(".postmortem pre.log-tail").splitlines() == [POISON, "é✓"]  # the log lines, as text
    assert page.locator(".gantt-row[data-unit] .gantt-name").all_inner_texts() == [unit]  # the timeline's row
    assert "javascript:window.__pwned = 4" in text  # shown, not linked
    assert page.locator('a[href^="javascript:"]').count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.screenshot(path=str(screenshots() / "collector-job-poisoned.png"), full_page=True)
