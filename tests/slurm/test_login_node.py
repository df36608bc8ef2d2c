"""A job operated from the "login node": `srtd ps` through Slurm, the live verbs through a relay step.

The dev cluster gives every node a runtime directory of its own (a TaskProlog, see
docs/slurm.md), and the test's own commands run with yet another one, so the job's
socket on its batch host is not where this process would look: every verb below
reaches the job by its Slurm job id, through `srun --jobid J --overlap ... srtd relay`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.command import SRTD
from tests.slurm.conftest import CLUSTER_CONFIG, custom_job, job_state, journal, squeue_steps, srtd, wait_for
from tests.slurm.users import other_user, srtd_as

pytestmark = pytest.mark.usefixtures("slurm")

RELAY = "srtd-relay"


def relay_steps(job: str) -> list[str]:
    return [sid for sid, name in squeue_steps(job).items() if name == RELAY]


def listed(env: dict[str, str], cwd: Path) -> dict[str, dict[str, Any]]:
    done = srtd("ps", "--json", cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return {j["job_id"]: j for j in map(json.loads, done.stdout.splitlines())}


def background(cwd: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    """`srtd ARGS` left running, its output kept."""
    argv = [*SRTD, *args]
    return subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def job_event(log_dir: Path, state: str) -> bool:
    try:
        return any(e.get("unit") is None and e["state"] == state for e in journal(log_dir))
    except (OSError, ValueError):
        return False


def test_a_job_is_listed_watched_restarted_tailed_and_stopped_from_outside_its_allocation(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None], request: pytest.FixtureRequest
) -> None:
    login = {"SRTD_RUNTIME_DIR": str(tmp_path / "login-rt")}  # the login node's own runtime directory
    recipe = tmp_path / "job.yaml"
    recipe.write_text(custom_job("login", token, tmp_path / "record"))  # a manual benchmark: it serves until stopped
    done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--json", cwd=tmp_path, env=login)
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout)
    job, log_dir = submitted["job_id"], Path(submitted["log_dir"])
    request.addfinalizer(lambda: subprocess.run(["scancel", job], check=False))
    wait_for("the job to be running", lambda: job_event(log_dir, "running"), timeout=180)

    # The socket is in the batch host's runtime directory, not in this process's.
    host = job_state(job)["BatchHost"]
    socket = Path(json.loads((log_dir / "attach.json").read_text())["socket"])
    assert socket.parent == Path(f"/tmp/srtd-dev-{host}-0")
    assert not (tmp_path / "login-rt").exists()

    # ps lists it from Slurm, with srtd's stage from the journal
    row = listed(login, tmp_path)[job]
    assert {k: row[k] for k in ("name", "variant", "state", "stage", "ready", "units", "nodes", "batch_host")} == {
        "name": f"login-{token}",
        "variant": None,
        "state": "running",
        "stage": "running",
        "ready": 3,
        "units": 3,
        "nodes": job_state(job)["NodeList"],
        "batch_host": host,
    }
    assert (row["log_dir"], row["socket"]) == (str(log_dir), str(socket))

    # attach --once --json through the relay: the journal's fold (plus what only the live job knows)
    done = srtd("attach", job, "--once", "--json", cwd=tmp_path, env=login)
    assert done.returncode == 0, done.stderr
    live = json.loads(done.stdout)
    replay = srtd("attach", "--replay", str(log_dir), "--once", "--json", cwd=tmp_path, env=login)
    assert replay.returncode == 0, replay.stderr
    replayed = json.loads(replay.stdout)
    assert replayed.pop("type") == "snapshot"
    assert {k: v for k, v in live.items() if k not in ("phases", "log_dir", "socket", "pid", "id")} == replayed
    assert (live["socket"], live["log_dir"]) == (str(socket), str(log_dir))

    # restart a worker: the journal has it as a restart, the other units untouched
    workers = sorted(u["name"] for u in live["units"] if u["name"].startswith("agg_"))
    target = workers[0]
    done = srtd("restart", job, target, cwd=tmp_path, env=login)
    assert (done.returncode, done.stdout) == (0, f"restart requested: {target}\n"), done.stderr

    def ready_again() -> bool:
        events = journal(log_dir)
        return any(e.get("unit") == target and e["state"] == "ready" and e.get("attempt") == 1 for e in events)

    wait_for(f"{target} ready again", ready_again, timeout=60)
    mine = [e for e in journal(log_dir) if e.get("unit") == target]
    assert [e["state"] for e in mine][-5:] == ["stopping", "exited", "backoff", "starting", "ready"]
    assert mine[-5]["reason"] == "restart requested"
    assert mine[-3]["reason"].startswith("restart 1 of ")
    asked = mine[-5]["seq"]
    assert [e for e in journal(log_dir) if e["seq"] > asked and e.get("unit") not in (target, None)] == []

    # tail -n 5: the log's last lines (of the new attempt)
    log = Path(next(u for u in live["units"] if u["name"] == target)["log"])
    done = srtd("tail", job, target, "-n", "5", cwd=tmp_path, env=login)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == log.read_text().splitlines()[-5:]
    assert done.stdout.splitlines()[-1] == f"ready {target}"

    # signal: delivered to the other worker's step (SIGCONT leaves it as it is)
    done = srtd("signal", job, workers[1], "CONT", cwd=tmp_path, env=login)
    assert (done.returncode, done.stdout) == (0, f"sent SIGCONT to {workers[1]}\n"), done.stderr

    # logs: the unit's current log from the shared log dir; without UNIT, every unit's log
    done = srtd("logs", job, target, cwd=tmp_path, env=login)
    assert (done.returncode, done.stdout) == (0, log.read_text()), done.stderr
    assert f"ready {target}" in Path(f"{log}.1").read_text().splitlines()  # the first attempt's, kept
    done = srtd("logs", job, "--json", cwd=tmp_path, env=login)
    assert json.loads(done.stdout) == {"log_dir": str(log_dir), "units": {u["name"]: u["log"] for u in live["units"]}}
    logs_follower = background(tmp_path, login, "logs", job, target, "-f")
    request.addfinalizer(logs_follower.kill)

    # a follower is a relay step while it runs; never a unit; gone when the client leaves
    follower = background(tmp_path, login, "tail", job, target, "-f")
    try:
        wait_for("the follower's relay step", lambda: relay_steps(job), timeout=30)
        done = srtd("attach", job, "--once", "--json", cwd=tmp_path, env=login)
        assert sorted(u["name"] for u in json.loads(done.stdout)["units"]) == sorted(u["name"] for u in live["units"])
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 130
    finally:
        follower.kill()
    wait_for("the relay step to end", lambda: not relay_steps(job), timeout=30)

    # another user: not listed, not reachable (srtd asks Slurm, and Slurm itself refuses a relay)
    other = other_user()
    code, out, err = srtd_as(other, "ps", "--json")
    assert (code, [json.loads(line)["job_id"] for line in out.splitlines()]) == (0, []), err
    code, out, err = srtd_as(other, "attach", job, "--once", "--json")
    assert (code, out) == (4, ""), err
    assert err.startswith(f"srtd: no running job '{job}' of yours (no socket "), err
    assert err.rstrip().endswith(f", and Slurm lists no job {job} of yours"), err
    refused = subprocess.run(
        ["srun", f"--jobid={job}", "--overlap", "-N1", "-n1", f"--nodelist={host}", f"--job-name={RELAY}", "true"],
        user=other.pw_uid,
        group=other.pw_gid,
        extra_groups=[],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0
    assert "Access/permission denied" in refused.stderr, refused.stderr

    # stop --wait through the relay: the tiered teardown, the job ends cancelled
    started = time.monotonic()
    done = srtd("stop", job, "--wait", cwd=tmp_path, env=login, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"stop requested: job {job}\njob cancelled\n"), done.stderr
    assert time.monotonic() - started < 60
    events = journal(log_dir)
    tiers = events[0]["detail"]["tiers"]
    stopped = {e["unit"]: e["seq"] for e in events if e.get("unit") and e["state"] in ("stopped", "failed")}
    stopping = {e["unit"]: e["seq"] for e in events if e.get("unit") and e["state"] == "stopping"}
    assert max(stopped[u] for u in tiers if tiers[u] == 0) < stopping["service_registry"]
    assert [e for e in events if e.get("unit") is None][-1]["state"] == "cancelled"
    assert not any(e.get("unit") == RELAY for e in events)
    # logs -f ended by itself with the job, having printed the whole log
    out, err = logs_follower.communicate(timeout=30)
    assert (logs_follower.returncode, out.decode()) == (0, log.read_text()), err
    assert not relay_steps(job)
    nothing_left(job)
