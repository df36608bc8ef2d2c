"""The relay's two halves without Slurm: the srun line, the task's pump, the job's mark."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from srtd.attach._relay import RELAY_STEP, relay_argv, run_relay
from srtd.launch import mark_comment, read_mark
from srtd.launch._queue import _parse_jobs


def test_the_relay_step_is_one_named_overlapping_task_on_the_batch_host() -> None:
    argv = relay_argv("4242", "node7", "/logs/4242")
    assert argv[:10] == [
        "srun",
        "--jobid=4242",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--nodelist=node7",
        f"--job-name={RELAY_STEP}",
        "--quiet",
        "--unbuffered",
        argv[9],
    ]
    assert argv[-4:] == ["relay", "4242", "--log-dir", "/logs/4242"]


def _pump_in_child(job: str, log_dir: Path | None) -> tuple[int, socket.socket]:
    """run_relay in a forked child whose stdin/stdout are one end of a socketpair; (pid, our end)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        code = run_relay(job, log_dir, stdin=theirs.fileno(), stdout=theirs.fileno())
        os._exit(code)
    theirs.close()
    return pid, ours


def test_the_pump_carries_bytes_both_ways_and_ends_when_the_client_leaves(tmp_path: Path) -> None:
    path = tmp_path / "4242.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    (tmp_path / "attach.json").write_text(json.dumps({"socket": str(path), "job_id": "4242", "pid": 1}))
    pid, client = _pump_in_child("4242", tmp_path)
    conn, _ = server.accept()
    conn.sendall(b'{"type":"hello"}\n')
    assert client.recv(100) == b'{"type":"hello"}\n'
    client.sendall(b'{"cmd":"snapshot"}\n')
    assert conn.recv(100) == b'{"cmd":"snapshot"}\n'
    client.shutdown(socket.SHUT_WR)  # the client leaves: EOF on the relay's stdin
    assert conn.recv(100) == b""  # ... and the relay has closed the job's socket
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    conn.close()
    server.close()
    client.close()


def test_without_a_socket_the_relay_answers_with_the_protocols_error(tmp_path: Path, runtime: Path) -> None:
    pid, client = _pump_in_child("4242", None)
    reply = json.loads(client.makefile("rb").readline())
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 4
    assert (reply["type"], reply["error"]) == ("error", "not-running")
    assert reply["message"].startswith(f"no running job '4242' of yours (no socket {runtime}/4242.sock) on ")
    client.close()


def test_the_mark_names_the_log_dir_with_the_job_id() -> None:
    comment = mark_comment(name="demo", variant="tp=4", log_dir="/out/%j/logs")
    assert comment == 'srtd:1 {"name":"demo","variant":"tp=4","log_dir":"/out/%j/logs"}'
    assert read_mark(comment, "17") == {"name": "demo", "variant": "tp=4", "log_dir": "/out/17/logs"}
    assert read_mark("(null)", "17") is None
    assert read_mark("srtd:1 not json", "17") is None
    line = "\x1f".join(["17", "PENDING", "demo", "alice", "", "", "Priority", comment])
    (job,) = _parse_jobs(line + "\n" + "garbage\n")
    assert (job.job_id, job.state, job.nodes, job.reason, job.ended) == ("17", "PENDING", "", "Priority", False)
    assert job.mark == {"name": "demo", "variant": "tp=4", "log_dir": "/out/17/logs"}
