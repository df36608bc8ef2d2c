"""`srtd collector` as a process: srtd's own reporter from real local jobs, restarts, tokens, refusals.

Runs local srtd jobs: wrap in `flock /tmp/srtd-ports.lock` on a shared machine.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from srtd.errors import exit_for_signal
from tests.collector.helpers import collector, collector_env, free_port
from tests.command import SRTD
from tests.reporting import EVERY_STAGE
from tests.reporting.test_collector_e2e import SHORT_JOB, job_id_of, recipe, run, token_in
from tests.supervisor.helpers import assert_no_leftovers, leftover_processes

pytestmark = pytest.mark.slow
TOKEN = f"collector-test-token-{uuid.uuid4().hex}"


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_srtd_reports_a_real_local_job_to_the_collector(tmp_path: Path) -> None:
    env = collector_env(SRTD_COLLECTOR_TOKEN=TOKEN)
    with collector(tmp_path / "c.db", env=env) as running:
        result = run(tmp_path, recipe(tmp_path, running.url), {"SRTCTL_STATUS_TOKEN": TOKEN})
        assert result.code == 0, result.output
        job_id = job_id_of(result)
        job = httpx.get(f"{running.url}/api/jobs/{job_id}", headers=auth()).json()
        feed = httpx.get(f"{running.url}/api/jobs/{job_id}/events", headers=auth()).json()
    assert (job["job_name"], job["status"], job["stage"], job["exit_code"], job["placeholder"]) == (
        "toy-status",
        "completed",
        "cleanup",
        0,
        False,
    )
    assert job["metadata"]["log_dir"] == str(result.log_dir)
    assert [(e["status"], e["stage"]) for e in feed["events"]] == [("submitted", None), *EVERY_STAGE]
    stderr = running.stderr.read_text()
    assert TOKEN not in stderr
    assert token_in(tmp_path, TOKEN) == []  # not in the database, its WAL, or any log


def test_a_collector_killed_and_restarted_loses_nothing_it_acknowledged(tmp_path: Path) -> None:
    db, port = tmp_path / "c.db", free_port()
    acked: list[int] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

        def send(i: int) -> None:
            body = {"status": "workers", "updated_at": "2026-11-30T10:00:00+00:00", "message": f"step {i}"}
            try:
                answer = client.put("/api/jobs/restarted", json=body)
            except httpx.TransportError:
                return
            if answer.status_code == 200:
                acked.append(i)

        with collector(db, port) as first:
            for i in range(150):
                send(i)
            first.kill()
        for i in range(150, 160):  # the collector is down: nothing acknowledged
            send(i)
        with collector(db, port) as second:
            for i in range(160, 300):
                send(i)
            messages = []
            after = 0
            while True:
                page = httpx.get(f"{second.url}/api/jobs/restarted/events?after={after}").json()
                messages += [e["message"] for e in page["events"]]
                after = page["next"]
                if not page["more"]:
                    break
    assert acked == [*range(150), *range(160, 300)]
    assert messages == [f"step {i}" for i in acked]


def _statuses(url: str) -> list[str]:
    """The statuses a collector has recorded for its one job (none before the job is there)."""
    jobs = httpx.get(f"{url}/api/jobs").json()["jobs"]
    if not jobs:
        return []
    return [e["status"] for e in httpx.get(f"{url}/api/jobs/{jobs[0]['job_id']}/events").json()["events"]]


def test_a_job_goes_on_and_ends_recorded_across_a_collector_restart(tmp_path: Path) -> None:
    db, port = tmp_path / "c.db", free_port()
    job = tmp_path / "slow.yaml"
    job.write_text(
        SHORT_JOB.replace("time.sleep(0.5)", "time.sleep(4)")
        + f"reporting:\n  status:\n    endpoint: http://127.0.0.1:{port}\n"
    )
    env = {k: v for k, v in collector_env().items() if not k.startswith("SLURM_")}
    with collector(db, port) as first:
        srtd = subprocess.Popen(
            [*SRTD, "run", str(job), "--log-dir", str(tmp_path / "logs")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while _statuses(first.url)[:2] != ["submitted", "starting"]:  # both in before the kill
            assert time.monotonic() < deadline, "the job never reported its start"
            time.sleep(0.1)
        first.kill()
    with collector(db, port) as second:
        _, err = srtd.communicate(timeout=120)
        assert srtd.returncode == 0, err
        (job_row,) = httpx.get(f"{second.url}/api/jobs").json()["jobs"]
        feed = httpx.get(f"{second.url}/api/jobs/{job_row['job_id']}/events").json()["events"]
    assert (job_row["status"], job_row["exit_code"]) == ("completed", 0)
    statuses = [e["status"] for e in feed]
    assert statuses[:2] == ["submitted", "starting"]  # recorded by the first collector
    assert statuses[-1] == "completed"  # by the second


def test_beyond_loopback_without_a_write_token_it_refuses_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SRTD, "collector", "--host", "0.0.0.0", "--db", str(tmp_path / "c.db")],
        env=collector_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "srtd: refusing to listen on 0.0.0.0 without a write token: set SRTD_COLLECTOR_TOKEN (and "
        "SRTD_COLLECTOR_READ_TOKEN to protect reads), or listen on 127.0.0.1\n"
    )
    assert not (tmp_path / "c.db").exists()


def test_a_port_in_use_and_a_file_that_is_no_database_are_one_line_each(tmp_path: Path) -> None:
    with collector(tmp_path / "c.db") as running:
        port = running.url.rsplit(":", 1)[1]
        taken = subprocess.run(
            [*SRTD, "collector", "--port", port, "--db", str(tmp_path / "d.db")],
            env=collector_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert (taken.returncode, taken.stderr) == (3, f"srtd: cannot listen on 127.0.0.1:{port}: Address already in use\n")
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not sqlite at all, " * 100)
    bad = subprocess.run(
        [*SRTD, "collector", "--db", str(garbage)],
        env=collector_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (bad.returncode, bad.stderr) == (
        2,
        f"srtd: {garbage}: cannot open the collector's database: file is not a database\n",
    )


def test_without_the_extra_the_command_says_how_to_get_it_and_plan_never_imports_it(tmp_path: Path) -> None:
    blocked = (
        "import sys; sys.modules['uvicorn'] = None; sys.argv = ['srtd', 'collector']; from srtd.cli import main; main()"
    )
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (3, "srtd: srtd collector needs uvicorn: pip install 'srtd[collector]'\n")
    example = Path(__file__).resolve().parents[2] / "recipes" / "features" / "status-reporting.yaml"
    plan = (
        "import sys; from srtd.cli import main; sys.argv = ['srtd', 'plan', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'srtd.collector')"
        " or m.startswith('srtd.collector')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", plan, str(example)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.splitlines()[-1] == "LOADED []", done.stderr


def test_twenty_jobs_reporting_at_once_are_all_recorded_with_every_unit_event(tmp_path: Path) -> None:
    env = collector_env(SRTD_COLLECTOR_TOKEN=TOKEN)
    job_env = {**{k: v for k, v in env.items() if not k.startswith("SLURM_")}, "SRTCTL_STATUS_TOKEN": TOKEN}
    del job_env["SRTD_COLLECTOR_TOKEN"]
    with collector(tmp_path / "c.db", env=env) as running:
        recipe_path = tmp_path / "short.yaml"
        # Each job runs for 3 s: they all report at once, and their end is not within the
        # second their 20 interpreters start in (then the final word's 0.5 s may not do)
        job = SHORT_JOB.replace("time.sleep(0.5)", "time.sleep(3)")
        recipe_path.write_text(job + f"reporting:\n  status:\n    endpoint: {running.url}\n    units: true\n")
        runs = []
        for i in range(20):
            log_dir = tmp_path / f"logs-{i}"
            argv = [*SRTD, "run", str(recipe_path), "--log-dir", str(log_dir)]
            proc = subprocess.Popen(argv, env=job_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            runs.append((proc, log_dir))
        for proc, _ in runs:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
        jobs = {j["job_id"]: j for j in httpx.get(f"{running.url}/api/jobs").json()["jobs"]}
        journals = {
            job_id: httpx.get(f"{running.url}/api/srtd/jobs/{job_id}/journal").json()["events"] for job_id in jobs
        }
    assert len(jobs) == 20
    assert {(j["status"], j["exit_code"]) for j in jobs.values()} == {("completed", 0)}
    for _, log_dir in runs:
        job_id = job_id_of_log(log_dir)
        on_disk = [json.loads(line) for line in (log_dir / "events.jsonl").read_text().splitlines()]
        assert journals[job_id] == on_disk, job_id


def job_id_of_log(log_dir: Path) -> str:
    return str(json.loads((log_dir / "plan.json").read_text())["job_id"])


def test_the_demo_fills_a_collector_with_a_sweep_and_a_failure(tmp_path: Path) -> None:
    with collector(tmp_path / "c.db", None, None, "--demo") as running:
        deadline = time.monotonic() + 180
        while "demo: " not in running.stderr.read_text() or " jobs ran as expected" not in running.stderr.read_text():
            assert running.proc.poll() is None, running.stderr.read_text()
            assert time.monotonic() < deadline, running.stderr.read_text()
            time.sleep(0.2)
        jobs = httpx.get(f"{running.url}/api/jobs").json()["jobs"]
        failing = next(j for j in jobs if j["job_name"] == "demo-failing-infra")
        journal = httpx.get(f"{running.url}/api/srtd/jobs/{failing['job_id']}/journal").json()["events"]
        sweep_page = httpx.get(f"{running.url}/sweeps/demo-toy-sweep").text
    assert "demo: 4 of 4 jobs ran as expected" in running.stderr.read_text()
    sweep = sorted((j["metadata"]["variant"], j["status"]) for j in jobs if j["job_name"] == "demo-toy-sweep")
    assert sweep == [("concurrency=1", "completed"), ("concurrency=2", "completed"), ("concurrency=4", "completed")]
    assert all(j["benchmark_results"]["succeeded"] == 24 for j in jobs if j["job_name"] == "demo-toy-sweep")
    assert (failing["status"], failing["exit_code"]) == ("failed", 1)
    assert next(e["unit"] for e in journal if e.get("unit") and e["state"] == "failed") == "service_model_cache"
    chart = json.loads(sweep_page.split('id="chart-data">')[1].split("</script>")[0])
    assert [p["point"] for p in chart["points"]] == ["concurrency=1", "concurrency=2", "concurrency=4"]
    assert all(p["tok_s_per_gpu"] > 0 and p["tok_s_per_user"] > 0 for p in chart["points"])


def test_stopping_the_demo_collector_stops_its_job_and_leaves_no_process(tmp_path: Path) -> None:
    tag = f"demo-stop-{uuid.uuid4().hex}"
    with collector(tmp_path / "c.db", None, collector_env(LEFTOVER_TAG=tag), "--demo") as running:
        deadline = time.monotonic() + 120
        while "[concurrency=2]" not in running.stderr.read_text():  # the second job is starting
            assert running.proc.poll() is None, running.stderr.read_text()
            assert time.monotonic() < deadline, running.stderr.read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # its units are up
        assert leftover_processes(tag)  # the job and its units carry the tag
        running.proc.terminate()
        assert running.proc.wait(timeout=60) == exit_for_signal(signal.SIGTERM)  # stopped, as any command
    assert_no_leftovers(tag, wait=10)
