"""Live srtd jobs in Debian's chromium: units updating without a reload, a stop read as cancelled,
a failed job's log lines, no horizontal scrollbar on any page (job pages included).

Real parts: a real `srtd collector`, real local `srtd run` jobs reporting to it with `units`
left unset (the journal feed is on because the collector's health answer says it takes it).
Skipped unless SRTD_TEST_BROWSER=1 (`nox -s browser`).  Screenshots go to $SRTD_SCREENSHOTS.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.browser.conftest import BROWSER_ONLY, TOY_JOB_HEAD, screenshots
from tests.browser.test_dashboard import job_env
from tests.collector.helpers import Running
from tests.command import SRTD

pytestmark = BROWSER_ONLY
# infrastructure, a service gated on it, a terminal unit that runs `TERMINAL` seconds; `units` unset
JOB = (
    TOY_JOB_HEAD.replace("NAME", "live-job")
    + """\
  - name: registry
    start: infra
    command: [python3, -u, -c, "import time; time.sleep(1.5); print('up'); time.sleep(3600)"]
    readiness: {log: {pattern: up}}
  - name: cache
    start: before_workers
    command: [CACHE]
    readiness: {log: {pattern: up}}
  - name: job
    command: [python3, -c, "import time; time.sleep(TERMINAL)"]
    terminal: true
reporting:
  status: {endpoint: "ENDPOINT"}
"""
)
CACHE_OK = "python3, -u, -c, \"import time; time.sleep(1.5); print('up'); time.sleep(3600)\""
CACHE_FAILS = (
    "python3, -u, -c, \"import sys; print('loading the cache'); print('error: <b>disk</b> full é✓'); sys.exit(3)\""
)


def start(served: Running, tmp_path: Path, job_id: str, *, cache: str = CACHE_OK, terminal: float = 4) -> Any:
    recipe = tmp_path / f"{job_id}.yaml"
    text = JOB.replace("ENDPOINT", served.url).replace("CACHE", cache).replace("TERMINAL", str(terminal))
    recipe.write_text(text)
    argv = [*SRTD, "run", str(recipe), "--log-dir", str(tmp_path / job_id), "--job-id", job_id]
    return subprocess.Popen(argv, env=job_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def open_when_listed(page: Any, served: Running, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while page.goto(f"{served.url}/jobs/{job_id}").status == 404:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def unit_state(page: Any, unit: str) -> str:
    cell = page.locator(f'table.units tr[data-unit="{unit}"] .unit-state')
    return str(cell.inner_text()) if cell.count() else ""


def no_horizontal_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_a_running_jobs_units_update_without_a_reload(served: Running, browser_page: Any, tmp_path: Path) -> None:
    page = browser_page
    job = start(served, tmp_path, "live-1", terminal=4)
    try:
        open_when_listed(page, served, "live-1")
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads
        seen: list[str] = []
        deadline = time.monotonic() + 90
        while not seen or seen[-1] != "stopped":  # the cache's state as the page shows it, live
            assert time.monotonic() < deadline, seen
            state = unit_state(page, "service_cache")
            if state and (not seen or seen[-1] != state):
                seen.append(state)
                if state == "ready":
                    page.wait_for_selector('.gantt-row[data-unit="service_cache"] rect[data-state="ready"]')
            time.sleep(0.1)
    finally:
        _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert "ready" in seen  # it was seen ready before it stopped, on the same page
    assert seen[-1] == "stopped"
    assert page.evaluate("window.__sameDocument") is True
    page.locator('[data-status="completed"]').first.wait_for()
    assert page.locator(".gantt-row.critical").count() >= 1  # the critical chain is marked
    assert no_horizontal_scroll(page)
    page.screenshot(path=str(screenshots() / "collector-job.png"), full_page=True)


def test_a_stopped_job_reads_cancelled(served: Running, browser_page: Any, tmp_path: Path) -> None:
    page = browser_page
    job = start(served, tmp_path, "live-stop", terminal=3600)
    try:
        open_when_listed(page, served, "live-stop")
        page.evaluate("window.__sameDocument = true")
        page.locator('table.units tr[data-unit="service_job"] .unit-state:text("ready")').wait_for(timeout=90_000)
        job.send_signal(signal.SIGTERM)  # what `srtd stop` and a plain scancel do
        page.locator('.about [data-status="cancelled"]').wait_for(timeout=60_000)
    finally:
        _, err = job.communicate(timeout=120)
    assert job.returncode == 143, err
    assert page.evaluate("window.__sameDocument") is True
    assert "(reported as failed)" in page.inner_text(".about")
    page.goto(served.url + "/?status=cancelled")
    assert page.locator("table.jobs tbody tr").evaluate_all("rs => rs.map(r => r.dataset.jobId)") == ["live-stop"]
    assert page.locator('tr[data-job-id="live-stop"] [data-status]').inner_text() == "cancelled"


def test_a_failed_jobs_page_shows_the_culprits_log_lines(served: Running, browser_page: Any, tmp_path: Path) -> None:
    job = start(served, tmp_path, "live-fail", cache=CACHE_FAILS)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 1, err
    page = browser_page
    page.goto(f"{served.url}/jobs/live-fail")
    culprit = page.inner_text(".postmortem .culprit-line")
    assert culprit.startswith("failure culprit: service_cache, exit code 3")
    tail = page.inner_text(".postmortem pre.log-tail").splitlines()
    assert tail[-2:] == ["loading the cache", "error: <b>disk</b> full é✓"]
    assert page.locator(".postmortem b").all_inner_texts() == ["service_cache"]  # the log's markup is text
    assert no_horizontal_scroll(page)
    page.screenshot(path=str(screenshots() / "collector-job-failed.png"), full_page=True)


def test_no_page_has_a_horizontal_scrollbar_at_1400_by_900(served: Running, browser_page: Any) -> None:
    page = browser_page
    assert page.viewport_size == {"width": 1400, "height": 900}
    page.goto(served.url + "/")
    jobs = page.locator("table.jobs tbody tr[data-job-id]").evaluate_all("rs => rs.map(r => r.dataset.jobId)")
    assert len(jobs) >= 3
    for path in ["/", *(f"/jobs/{job_id}" for job_id in jobs), "/sweeps/live-job", "/compare?sweep=live-job"]:
        page.goto(served.url + path)
        assert no_horizontal_scroll(page), path
