"""The attach server on a real socket, serving real `srtd run` jobs."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from srtd.attach._client import Connection
from srtd.attach._paths import POINTER_NAME
from srtd.attach._protocol import event_of, view_of
from srtd.errors import AttachError
from srtd.events import Event, JobView
from srtd.unit import Restart, RestartMode
from tests.attach.helpers import DEMO, REPO, RESTART, JobProcess, env, srtd
from tests.command import SRTD
from tests.supervisor.helpers import PlanMaker, assert_no_leftovers, check_journal

pytestmark = pytest.mark.slow


def _fold_to(job: JobProcess, seq: int) -> JobView:
    """The fold of the journal up to `seq`, once the file holds it: the journal's lines are
    written behind the events a socket sends, so a client can be ahead of the file."""
    events = job.wait_for(lambda seen: bool(seen) and seen[-1].seq >= seq)
    return JobView.fold([e for e in events if e.seq <= seq], list((events[0].detail or {})["units"]))


def _events_until(conn: Connection, done: object, timeout: float = 60.0) -> list[Event]:
    """Event messages until `done(event)`; other messages (replies) are skipped."""
    conn.settimeout(timeout)
    seen: list[Event] = []
    for message in conn.messages():
        if message["type"] == "event":
            seen.append(event_of(message))
            if done(seen[-1]):  # type: ignore[operator]
                return seen
        elif message["type"] in ("end", "overflow"):
            raise AssertionError(f"stream ended early: {message}")
    raise AssertionError(f"connection closed after {[(e.unit, e.state) for e in seen]}")


def test_snapshot_is_the_fold_and_a_resumed_subscription_has_no_gap(tmp_path: Path, runtime: Path) -> None:
    job = JobProcess.of_toy(RESTART, tmp_path)
    try:
        path = job.socket()
        assert path.parent == runtime
        assert oct(runtime.stat().st_mode & 0o777) == "0o700"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        job.running()
        with Connection(path) as conn:
            snapshot = conn.request("snapshot")
        assert view_of(snapshot) == _fold_to(job, snapshot["seq"])
        assert [u["name"] for u in snapshot["units"]] == ["agg_0_node1", "agg_1_node1", "frontend_0"]
        assert snapshot["units"][0]["node"] == "node1"
        assert snapshot["units"][0]["log"].endswith("/workers/node1_agg_w0.out")

        # Subscribe, ask for a restart on the same connection, leave half-way, resume.
        first = Connection(path)
        start = first.request("subscribe")
        assert view_of(start) == _fold_to(job, start["seq"])
        first.send(cmd="restart", unit="agg_0_node1", id=7)
        before = _events_until(first, lambda e: e.unit == "agg_0_node1" and e.state == "exited")
        first.close()
        with Connection(path) as second:
            second.request("subscribe", from_seq=before[-1].seq)
            after = _events_until(second, lambda e: e.unit == "agg_0_node1" and e.state == "ready" and e.attempt == 1)
            second.request("stop")
        got = before + after
        assert [e.seq for e in got] == list(range(start["seq"] + 1, got[-1].seq + 1))
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
        journal = {e.seq: e for e in job.events()}
        assert got == [journal[e.seq] for e in got]
    finally:
        job.kill()
    events = check_journal(tmp_path / "logs" / "events.jsonl", [])
    assert events[-1].state == "cancelled"
    assert events[-1].reason is not None
    assert events[-1].reason.startswith("stop requested through srtd attach")
    assert not path.exists()
    assert not (tmp_path / "logs" / POINTER_NAME).exists()
    assert_no_leftovers(str(tmp_path / "logs"))


def test_restart_restarts_one_worker_and_the_commands_work(tmp_path: Path, runtime: Path) -> None:
    log_dir = tmp_path / "logs"
    job = JobProcess.of_toy(RESTART, tmp_path)
    try:
        job.socket()
        running = job.running()
        listed = srtd("ps", "--json", "--local")
        assert listed.returncode == 0, listed.stderr
        (entry,) = [json.loads(line) for line in listed.stdout.splitlines()]
        assert {"job_id", "name", "state", "stage", "started", "log_dir", "socket"} <= set(entry)
        assert (entry["name"], entry["state"], entry["stage"], entry["log_dir"]) == (
            "toy-restart",
            "running",
            "running",
            str(log_dir),
        )
        job_id = entry["job_id"]
        assert job_id == running[0].detail["job_id"]  # type: ignore[index]

        once = srtd("attach", job_id, "--once", "--json")
        assert once.returncode == 0, once.stderr
        snapshot = json.loads(once.stdout)
        assert [u["state"] for u in snapshot["units"]] == ["ready", "ready", "ready"]

        unknown = srtd("restart", job_id, "nope")
        assert (unknown.returncode, unknown.stderr.strip()) == (4, f"srtd: no unit 'nope' in job {job_id}")
        missing = srtd("attach", "no-such-job", "--once")
        assert missing.returncode == 4
        assert "no running job 'no-such-job' of yours" in missing.stderr

        follow_out = tmp_path / "tail-f.txt"
        with open(follow_out, "w") as out:
            follower = subprocess.Popen([*SRTD, "tail", job_id, "agg_1_node1", "-f"], cwd=REPO, env=env(), stdout=out)
        stream_out = tmp_path / "attach-json.txt"
        with open(stream_out, "w") as out:
            streamer = subprocess.Popen([*SRTD, "attach", job_id, "--json"], cwd=REPO, env=env(), stdout=out)
        time.sleep(1.0)  # the follower and the streamer are connected
        sent = srtd("signal", job_id, "frontend_0", "CONT")
        assert (sent.returncode, sent.stdout) == (0, "sent SIGCONT to frontend_0\n"), sent.stderr
        mark = len(job.events())
        done = srtd("restart", job_id, "agg_1_node1")
        assert (done.returncode, done.stdout) == (0, "restart requested: agg_1_node1\n"), done.stderr
        seen = job.wait_for(
            lambda es: any(e.unit == "agg_1_node1" and e.state == "ready" and e.attempt == 1 for e in es)
        )
        mine = [(e.unit, e.state, e.attempt, e.reason) for e in seen[mark:]]
        assert mine == [
            ("agg_1_node1", "stopping", 0, "restart requested"),
            ("agg_1_node1", "exited", 0, "stopped: restart requested"),
            ("agg_1_node1", "backoff", 1, "restart 1 of 3 in 0 s: restart requested"),
            ("agg_1_node1", "starting", 1, None),
            ("agg_1_node1", "ready", 1, None),
        ]
        view = JobView.fold(seen, [])
        assert view.units["agg_1_node1"].restarts == 1
        assert (view.units["agg_0_node1"].restarts, view.units["frontend_0"].restarts) == (0, 0)
        assert (log_dir / "workers" / "node1_agg_w1.out.1").exists()

        tail = srtd("tail", job_id, "agg_1_node1", "-n", "1")
        assert tail.returncode == 0, tail.stderr
        assert tail.stdout.startswith("toy-worker: ready on 127.0.0.1:")

        stopped = srtd("stop", job_id, "--wait")
        assert stopped.stdout == f"stop requested: job {job_id}\njob cancelled\n", stopped.stderr
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
        assert follower.wait(timeout=30) == 0  # the job ended, so did the follow
        assert streamer.wait(timeout=30) == 0
        streamed = [Event.from_line(line + "\n") for line in stream_out.read_text().splitlines()]
        journal = job.events()
        assert streamed == journal[streamed[0].seq - 1 :]  # every event from where it joined to the end
        assert streamed[-1].state == "cancelled"
        followed = follow_out.read_text().splitlines()
        # the first attempt's tail, then the restarted attempt's own lines
        assert [line.split(" on ")[0] for line in followed if "ready on" in line] == ["toy-worker: ready"] * 2
    finally:
        job.kill()
    check_journal(log_dir / "events.jsonl", [])
    assert srtd("ps", "--json", "--local").stdout == ""
    assert_no_leftovers(str(log_dir))


def test_stop_tears_the_job_down_by_tier(maker: PlanMaker, runtime: Path) -> None:
    maker.unit("etcd", tier=2)
    maker.unit("store", tier=1)
    maker.unit("worker", tier=0)
    maker.unit("router", tier=0)
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        job.socket()
        job.wait_for(lambda es: sum(e.state == "ready" for e in es) == 4)
        stopped = srtd("stop", "local-1", "--wait")
        assert stopped.returncode == 0, stopped.stderr
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
    finally:
        job.kill()
    events = check_journal(maker.log_dir / "events.jsonl", ["etcd", "store", "worker", "router"])
    stop = next(e.seq for e in events if e.unit is None and e.state == "stopping")
    tiers = {"worker": 0, "router": 0, "store": 1, "etcd": 2}
    for low, high in ((0, 1), (1, 2)):
        ended = max(e.seq for e in events if e.unit and tiers[e.unit] == low and e.state == "stopped")
        began = min(e.seq for e in events if e.unit and tiers[e.unit] == high and e.state == "stopping")
        assert stop < ended < began


def _as_nobody(path: Path) -> str:
    """Connect to `path` from a forked child running as nobody; what it got back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, connect, report, leave without cleanup
        result = "connected"
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            Connection(path, timeout=5).close()
        except AttachError as e:
            result = f"AttachError: {e}"
        except BaseException as e:
            result = f"{type(e).__name__}: {e}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        got = f.read().decode()
    os.waitpid(pid, 0)
    return got


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as a second user")
def test_a_second_uid_is_refused(maker: PlanMaker, runtime: Path) -> None:
    maker.unit("svc")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        path = job.socket()
        job.running()
        # As created: the private directory keeps the other user out altogether.
        assert _as_nobody(path) == f"AttachError: {path}: permission denied (the job belongs to another user)"
        # Even with the permissions opened up, the server checks the peer's uid.
        os.chmod(runtime.parent, 0o755)
        os.chmod(runtime, 0o755)
        os.chmod(path, 0o666)
        assert _as_nobody(path) == "AttachError: refused: job local-1 belongs to uid 0, and you are uid 65534"
        with Connection(path) as conn:  # the owner is served as before
            assert conn.request("snapshot")["state"] == "running"
            conn.request("stop")
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
    finally:
        job.kill()


def test_a_client_that_stops_reading_is_dropped_and_the_job_goes_on(maker: PlanMaker, runtime: Path) -> None:
    # A unit that crashes in a loop writes events as fast as srtd can restart it.
    loop = Restart(policy=RestartMode.ALWAYS, max_restarts=100_000, backoff_seconds=0.0, max_backoff_seconds=0.0)
    maker.unit("loop", argv=("/bin/sh", "-c", "exit 1"), marker=False, restart=loop, critical=False)
    maker.unit("steady")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root, SRTD_ATTACH_QUEUE="32")
    try:
        path = job.socket()
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(str(path))
        slow.sendall(b'{"cmd": "subscribe"}\n')  # ... and reads nothing for a while
        # Its queue (32) and the socket buffers hold some 300 events; twice that is
        # well past the drop, and well inside the 10 s a dropped client has to read.
        subscribed = len(job.events())
        job.wait_for(lambda es: len(es) > subscribed + 700, timeout=120)
        # What the slow client was sent: events without a gap, then `overflow`, then the end.
        slow.settimeout(10)
        messages = [json.loads(line) for line in slow.makefile("rb").read().splitlines()]
        slow.close()
        assert [m["type"] for m in messages[:2]] == ["hello", "snapshot"]
        assert {m["type"] for m in messages[2:-1]} <= {"event"}
        events = [event_of(m) for m in messages[2:-1]]
        first = messages[1]["seq"] + 1
        assert [e.seq for e in events] == list(range(first, first + len(events)))
        last = messages[-1]
        assert last["type"] == "overflow"
        assert last["last_seq"] == (events[-1].seq if events else messages[1]["seq"])
        assert len(events) < 700
        # The job did not notice.  Resuming where the slow client left off loses nothing.
        with Connection(path) as again:
            again.request("subscribe", from_seq=last["last_seq"])
            more = _events_until(again, lambda e: e.seq >= last["last_seq"] + 100)
            assert [e.seq for e in more] == list(range(last["last_seq"] + 1, last["last_seq"] + 101))
            written = job.wait_for(lambda es: bool(es) and es[-1].seq >= more[-1].seq)  # written behind the stream
            journal = {e.seq: e for e in written}
            assert events + more == [journal[e.seq] for e in events + more]
        with Connection(path) as control:
            control.request("stop")
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
    finally:
        job.kill()
    check_journal(maker.log_dir / "events.jsonl", ["loop", "steady"])


def test_garbage_does_not_crash_or_stall_the_server(maker: PlanMaker, runtime: Path) -> None:
    maker.unit("svc")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    rng = random.Random(8)
    try:
        path = job.socket()
        job.running()

        def client() -> socket.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(path))
            return s

        def served() -> None:
            began = time.monotonic()
            with Connection(path, timeout=10) as conn:
                assert conn.request("snapshot")["state"] == "running"
            assert time.monotonic() - began < 5

        idle = client()
        idle.sendall(b'{"cmd": "snap')  # half a line, and the client stays silent
        served()
        half = client()
        half.sendall(b'{"cmd": "snapshot"')  # half a line, then gone
        half.close()
        served()
        noise = client()
        noise.sendall(bytes(rng.randrange(256) for _ in range(200_000)))
        served()
        huge = client()
        huge.sendall(b"x" * (20 * 1024 * 1024) + b"\n" + b'{"cmd": "snapshot", "id": 1}\n')
        replies = huge.makefile("rb")
        assert json.loads(replies.readline())["type"] == "hello"
        assert json.loads(replies.readline()) == {
            "type": "error",
            "error": "too-long",
            "message": "request longer than 65536 bytes",
        }
        after = json.loads(replies.readline())
        assert (after["type"], after["id"]) == ("snapshot", 1)
        served()
        with Connection(path) as conn:
            for bad, message in (
                ({"cmd": "fly"}, "unknown cmd 'fly'; one of snapshot, subscribe, tail, stop, restart, signal"),
                ({"cmd": "restart"}, "restart needs a unit name"),
                ({"cmd": "tail", "unit": "svc", "lines": -1}, "lines must be an integer from 0 to 10000"),
                ({"cmd": "subscribe", "from_seq": "x"}, "from_seq must be an integer from 0 to 4611686018427387904"),
                ({"cmd": "signal", "unit": "svc", "signal": "NOPE"}, "unknown signal 'NOPE'"),
                ({"cmd": "subscribe", "from_seq": 10**6}, None),
            ):
                with pytest.raises(AttachError) as info:
                    conn.request(**bad)  # type: ignore[arg-type]
                if message is not None:
                    assert str(info.value) == message
            conn.send(cmd="x")  # raw: a reply of type error, the connection stays usable
            assert conn.receive()["error"] == "bad-request"  # type: ignore[index]
            conn._sock.sendall(b"[1, 2]\n\xff\xfe\n")
            assert [conn.receive()["message"] for _ in range(2)] == ["not a JSON object"] * 2  # type: ignore[index]
            assert conn.request("snapshot")["state"] == "running"
            conn.request("stop")
        for s in (idle, noise, huge):
            s.close()
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
    finally:
        job.kill()
    assert "Traceback" not in out


def test_a_stale_socket_is_replaced(maker: PlanMaker, runtime: Path) -> None:
    runtime.mkdir(mode=0o700)
    stale = runtime / "local-1.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))  # bound, never listening, closed: what a SIGKILLed srtd leaves
    dead.close()
    other = runtime / "gone.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(other))
    dead.close()
    maker.unit("svc")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        assert job.socket() == stale
        job.running()
        listed = [json.loads(line) for line in srtd("ps", "--json", "--local").stdout.splitlines()]
        assert [j["socket"] for j in listed] == [str(stale)]
        stopped = srtd("stop", "local-1")
        assert stopped.returncode == 0, stopped.stderr
        code, out = job.finish()
        assert code == 128 + signal.SIGTERM, out
    finally:
        job.kill()
    assert not stale.exists()


def test_the_live_view_and_the_replay_end_on_the_same_screen(tmp_path: Path, runtime: Path) -> None:
    log_dir = tmp_path / "logs"
    job = JobProcess.of_toy(DEMO, tmp_path)
    try:
        job.socket()
        live = srtd("attach", timeout=120)  # the only running job, until it ends
        code, out = job.finish()
        assert code == 0, out
    finally:
        job.kill()
    assert live.returncode == 0, live.stderr
    replay = srtd("attach", "--replay", str(log_dir))
    assert replay.returncode == 0, replay.stderr
    assert live.stdout == replay.stdout, f"live:\n{live.stdout}\nreplay:\n{replay.stdout}\n{live.stderr}"
    assert "toy-demo (job " in replay.stdout
    assert "succeeded, exit code 0" in replay.stdout
    final = json.loads(srtd("attach", "--replay", str(log_dir), "--once", "--json").stdout)
    assert final["state"] == "succeeded"
    assert [u["state"] for u in final["units"]] == ["stopped"] * 6
    assert_no_leftovers(str(log_dir))
