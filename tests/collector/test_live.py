"""Live jobs: the journal feed on by default for an srtd collector, the job's revision feed,
and a stop by the user that the dashboard reads as cancelled (the contract's status unchanged)."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from srtd.collector import Store, Tokens, create_app
from srtd.events import Event
from srtd.reporting import StatusReporter
from tests.collector.helpers import collector, collector_env
from tests.collector.test_journal_feed import drive, journal, make_plan
from tests.command import SRTD
from tests.reporting.test_collector_e2e import SHORT_JOB
from tests.reporting.test_sender import Log

TOKEN = f"live-test-token-{uuid.uuid4().hex}"


@pytest.mark.anyio
async def test_unset_units_sends_the_journal_to_an_srtd_collector(store: Store, tmp_path: Path) -> None:
    app = create_app(store, Tokens(write=TOKEN))
    reporter = StatusReporter(
        make_plan(tmp_path, units=None),
        transport=httpx.ASGITransport(app=app),
        environ={"TOK": TOKEN},
        log=Log(),
        final_wait=5,
    )
    events = journal(restarts=2)
    await drive(reporter, events)
    assert store.journal("7") == events
    assert reporter.journals[0].supported is True


@pytest.mark.anyio
async def test_unset_units_sends_nothing_more_than_the_contract_to_an_srtctl_collector(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def srtctl(request: httpx.Request) -> httpx.Response:  # upstream's health answer: no "srtd" key
        seen.append((request.method, request.url.path))
        if request.url.path == "/api/health":
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(201 if request.method == "POST" else 200)

    reporter = StatusReporter(
        make_plan(tmp_path, units=None), transport=httpx.MockTransport(srtctl), environ={}, log=Log()
    )
    await drive(reporter, journal(restarts=2))
    assert [p for _, p in seen if p.startswith("/api/srtd/")] == []
    assert ("GET", "/api/health") in seen
    assert reporter.journals[0].supported is False


@pytest.mark.anyio
async def test_units_true_still_sends_without_asking(tmp_path: Path) -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json={"recorded": 1})

    reporter = StatusReporter(
        make_plan(tmp_path, units=True), transport=httpx.MockTransport(answer), environ={}, log=Log()
    )
    await drive(reporter, journal(restarts=1))
    assert "/api/health" not in seen
    assert "/api/srtd/jobs/7/journal" in seen


@pytest.mark.anyio
async def test_the_changes_feed_moves_with_journal_batches_and_statuses(
    api: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    assert (await api.get("/api/srtd/jobs/9/changes?after=0")).status_code == 404
    first = [Event(seq=1, ts=1.0, state="starting", detail={"job": "j", "job_id": "9", "units": ["w"]})]
    assert (
        await api.post("/api/srtd/jobs/9/journal", json={"events": [e.as_json() for e in first]})
    ).status_code == 200
    feed = (await api.get("/api/srtd/jobs/9/changes?after=0")).json()
    assert (len(feed["events"]), feed["more"]) == (1, False)
    assert (await api.get(f"/api/srtd/jobs/9/changes?after={feed['next']}")).json()["events"] == []
    unit = Event(seq=2, ts=2.0, unit="w", state="starting", attempt=0)
    await api.post("/api/srtd/jobs/9/journal", json={"events": [unit.as_json()]})
    moved = (await api.get(f"/api/srtd/jobs/9/changes?after={feed['next']}")).json()
    assert moved["next"] > feed["next"]
    assert moved["events"] == [{"seq": moved["next"]}]
    assert (await anonymous.get("/api/srtd/jobs/9/changes?after=0")).status_code == 401


def _cancelled_recipe(url: str) -> str:
    # `units` unset: the journal goes to this collector because its health answer says it takes it
    long_job = SHORT_JOB.replace("time.sleep(0.5)", "time.sleep(3600)")
    return long_job + f"reporting:\n  status:\n    endpoint: {url}\n"


@pytest.mark.slow
def test_a_user_stop_reads_cancelled_and_the_contract_keeps_failed_143(tmp_path: Path) -> None:
    env = collector_env(SRTD_COLLECTOR_TOKEN=TOKEN)
    job_env = {k: v for k, v in env.items() if not k.startswith(("SLURM_", "SRTD_"))}
    job_env["SRTCTL_STATUS_TOKEN"] = TOKEN
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with collector(tmp_path / "c.db", env=env) as running:
        recipe_path = tmp_path / "long.yaml"
        recipe_path.write_text(_cancelled_recipe(running.url))
        argv = [*SRTD, "run", str(recipe_path), "--log-dir", str(tmp_path / "logs")]
        proc = subprocess.Popen(argv, env=job_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        job_id = ""
        while True:  # until the journal says the job runs
            assert proc.poll() is None
            assert time.monotonic() < deadline
            jobs = httpx.get(f"{running.url}/api/jobs", headers=auth).json()["jobs"]
            if jobs:
                job_id = jobs[0]["job_id"]
                events = httpx.get(f"{running.url}/api/srtd/jobs/{job_id}/journal", headers=auth).json()["events"]
                if any(e.get("unit") is None and e["state"] == "running" for e in events):
                    break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err
        job = httpx.get(f"{running.url}/api/jobs/{job_id}", headers=auth).json()
        listed = httpx.get(f"{running.url}/?status=cancelled", headers=auth).text
        failed = httpx.get(f"{running.url}/?status=failed", headers=auth).text
    assert (job["status"], job["exit_code"], job["shown_status"]) == ("failed", 143, "cancelled")
    assert f'data-job-id="{job_id}"' in listed
    assert 'data-status="cancelled"' in listed
    assert f'data-job-id="{job_id}"' not in failed
