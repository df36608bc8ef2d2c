"""A real job's attach socket under a newline flood, a deeply nested request and arbitrary
frames: linear work, one `bad-request` reply, nothing on the job's console, the job and
its other clients unaffected (docs/attach.md#limits-of-a-frame)."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from srtd.attach._client import Connection
from srtd.attach._protocol import MAX_DEPTH, MAX_REQUEST, VERBS, BadRequest, parse_request
from tests.attach.conftest import maker, runtime  # noqa: F401  (fixtures)
from tests.attach.helpers import RESTART, JobProcess
from tests.supervisor.helpers import PlanMaker

pytestmark = pytest.mark.slow

FLOOD = 64 * 1024 * 1024  # bytes of newlines: seconds of work when linear, minutes when quadratic


def connect(path: Path) -> tuple[socket.socket, Any]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(str(path))
    replies = s.makefile("rb")
    assert json.loads(replies.readline())["type"] == "hello"
    return s, replies


def stopped(job: JobProcess, path: Path) -> str:
    """Still serving, the job is stopped through its socket; what its console said."""
    with Connection(path) as control:
        assert control.request("snapshot")["state"] == "running"
        control.request("stop")
    code, out = job.finish()
    assert code == 128 + signal.SIGTERM, out
    return out


def assert_quiet(output: str) -> None:
    """The job's console says nothing about its attach clients."""
    for word in ("Traceback", "ExceptionGroup", "srtd: attach", "connection error"):
        assert word not in output, output


def test_a_newline_flood_and_a_nested_request_leave_the_job_and_its_clients_alone(
    tmp_path: Path,
    runtime: Path,  # noqa: F811
) -> None:
    job = JobProcess.of_toy(RESTART, tmp_path)
    try:
        path = job.socket()
        job.running()
        with Connection(path) as normal:
            units = [u["name"] for u in normal.request("snapshot")["units"]]
            # The flood: the server reads all of it within a generous bound, and answers meanwhile.
            flood, _ = connect(path)
            sent = threading.Event()

            def send_flood() -> None:
                chunk = b"\n" * (1 << 20)
                for _ in range(FLOOD // len(chunk)):
                    flood.sendall(chunk)
                sent.set()

            began = time.monotonic()
            sender = threading.Thread(target=send_flood, daemon=True)
            sender.start()
            while not sent.is_set() and time.monotonic() - began < 60:
                reply = normal.request("snapshot")
                assert (reply["state"], [u["name"] for u in reply["units"]]) == ("running", units)
                time.sleep(0.2)
            assert sent.wait(timeout=1), f"the server took more than 60 s to read {FLOOD} newlines"
            flood.close()

            # The nested request: 60 KB of brackets, one `bad-request`, the connection still serves.
            nested, replies = connect(path)
            depth = 30_000
            nested.sendall(b'{"cmd": "snapshot", "id": 1, "x": ' + b"[" * depth + b"]" * depth + b"}\n")
            assert json.loads(replies.readline()) == {
                "type": "error",
                "error": "bad-request",
                "message": f"nested deeper than {MAX_DEPTH} levels",
            }
            nested.sendall(b'{"cmd": "snapshot", "id": 2}\n')
            after = json.loads(replies.readline())
            assert (after["type"], after["id"], after["state"]) == ("snapshot", 2, "running")
            nested.close()
        out = stopped(job, path)
    finally:
        job.kill()
    assert_quiet(out)
    assert not any(e.state == "exited" for e in job.events() if e.unit is not None and e.reason != "stopped")


def _stays_quiet(frame: bytes) -> bool:
    """A frame that parses as a request other than `snapshot` would act on the job (or start
    a stream): those are left out, and so are blank lines (no reply, by the protocol)."""
    if not frame.strip():
        return False
    try:
        return parse_request(frame.strip()).cmd == "snapshot"
    except BadRequest:
        return True


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
REQUESTS = st.fixed_dictionaries(
    {"cmd": st.sampled_from((*VERBS, "fly", ""))},
    optional={"id": JSON, "unit": JSON, "from_seq": JSON, "lines": JSON, "follow": JSON, "signal": JSON},
)
NESTED = st.integers(MAX_DEPTH - 3, 30_000).map(lambda n: b'{"cmd": "snapshot", "x": ' + b"[" * n + b"]" * n + b"}")
FRAMES = st.one_of(
    st.binary(max_size=600),
    JSON.map(lambda v: json.dumps(v).encode()),
    REQUESTS.map(lambda v: json.dumps(v).encode()),
    NESTED,
    st.binary(min_size=MAX_REQUEST - 10, max_size=MAX_REQUEST + 10).map(lambda b: b.replace(b"\n", b"x")),
).map(lambda b: b.replace(b"\n", b" "))


def test_any_frame_gets_a_reply_or_one_bad_request_and_the_server_keeps_serving(
    maker: PlanMaker,  # noqa: F811
    runtime: Path,  # noqa: F811
) -> None:
    maker.unit("svc")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        path = job.socket()
        job.running()

        @settings(max_examples=200)
        @given(frame=FRAMES)
        def one_frame(frame: bytes) -> None:
            assume(_stays_quiet(frame))
            s, replies = connect(path)
            with s:
                s.sendall(frame + b"\n" + b'{"cmd": "snapshot", "id": "probe"}\n')
                first = json.loads(replies.readline())
                if first["type"] == "error":
                    assert first["error"] in ("bad-request", "too-long"), first
                    assert first["error"] == "too-long" or len(frame) <= MAX_REQUEST
                else:
                    assert first["type"] == "snapshot", first
                probe = json.loads(replies.readline())
                assert (probe["type"], probe["id"], probe["state"]) == ("snapshot", "probe", "running")

        one_frame()
        out = stopped(job, path)
    finally:
        job.kill()
    assert_quiet(out)
