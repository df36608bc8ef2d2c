"""A job whose srtd was SIGKILLed: `ps` and `attach` tell it from a live one, and its socket goes."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from srtd.errors import EXIT_ATTACH
from tests.attach.helpers import JobProcess, srtd
from tests.supervisor.helpers import PlanMaker, assert_no_leftovers

pytestmark = pytest.mark.slow


def test_a_killed_srtd_s_job_is_dead_to_ps_and_attach_and_its_socket_is_removed(
    maker: PlanMaker, runtime: Path
) -> None:
    maker.unit("etcd")
    maker.unit("worker")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        sock = job.socket()
        job.running()
        live = srtd("ps", "--local", "--json")
        assert [json.loads(line)["state"] for line in live.stdout.splitlines()] == ["running"]
        pid = job.proc.pid
        os.kill(pid, signal.SIGKILL)
        job.proc.wait(timeout=30)
    finally:
        job.kill()
    assert_no_leftovers(maker.token)  # the guardian ended the units
    assert sock.exists()  # what SIGKILL leaves: the socket, attach.json, a journal that ends `running`
    assert json.loads(job.events()[-1].to_line())["state"] == "running"

    listed = srtd("ps", "--local", "--json")
    assert listed.returncode == 0, listed.stderr
    (dead,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert dead["job_id"] == "local-1"
    assert dead["state"] == "dead"
    assert dead["stage"] == "running"
    assert dead["reason"] == f"its srtd, pid {pid}, is gone"
    assert dead["log_dir"] == str(maker.log_dir)
    table = srtd("ps", "--local")  # a pipe's width: the state's cell may wrap, its words are kept
    words = " ".join(re.sub(r"[│┃]", " ", table.stdout).split())
    assert f"dead (its srtd, pid {pid}, is" in words, table.stdout

    replay = srtd("attach", "--replay", str(maker.log_dir))
    assert replay.returncode == 0, replay.stderr
    assert f"test (job local-1): running (dead: its srtd, pid {pid}, is gone)" in replay.stdout

    said = f"srtd: job local-1 is dead: its srtd (pid {pid}) is gone without ending it; what it journaled: "
    said += f"srtd attach --replay {maker.log_dir}\n"
    by_id = srtd("attach", "local-1", "--once")
    assert (by_id.returncode, by_id.stderr) == (EXIT_ATTACH, said)
    assert not sock.exists()  # nothing answered on it and its srtd is gone: removed
    assert not sock.with_suffix(".json").exists()
    by_dir = srtd("attach", str(maker.log_dir))  # attach.json is still there: it says whose the job was
    assert (by_dir.returncode, by_dir.stderr) == (EXIT_ATTACH, said)
    assert srtd("ps", "--local").stdout == "no jobs\n"


def test_a_live_job_is_never_called_dead(maker: PlanMaker, runtime: Path) -> None:
    """The record beside a live job's socket names a running srtd: `ps` lists it running, once."""
    maker.unit("etcd")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        sock = job.socket()
        job.running()
        record = json.loads(sock.with_suffix(".json").read_text())
        assert record["pid"] == job.proc.pid
        assert record["log_dir"] == str(maker.log_dir)
        listed = [json.loads(line) for line in srtd("ps", "--local", "--json").stdout.splitlines()]
        assert [(j["job_id"], j["state"]) for j in listed] == [("local-1", "running")]
        replay = srtd("attach", "--replay", str(maker.log_dir))
        assert re.search(r"test \(job local-1\): running *\n", replay.stdout), replay.stdout
        assert srtd("stop", "local-1", "--wait").returncode == 0
        assert job.finish()[0] == 143
    finally:
        job.kill()
    assert not sock.exists()
    assert not sock.with_suffix(".json").exists()
