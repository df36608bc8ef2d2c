"""`srtd attach` against a peer that sends anything: one line naming the socket, exit 4.

The peer is a real Unix socket server in this process (a thread serving one connection);
the client is the real `srtd` in a subprocess under the address-space, CPU and wall-clock
bounds of `bounded` (1 GiB, 20 s).
"""

from __future__ import annotations

import contextlib
import json
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from srtd.attach._protocol import MAX_DEPTH, MAX_MESSAGE
from tests.hostile.helpers import bounded, one_line

HELLO = {"type": "hello", "protocol": 1, "job_id": "fake", "name": "fake", "state": "running", "pid": 1}

Peer = Callable[[socket.socket], None]


def line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def hello_then(reply: bytes) -> Peer:
    """Greets as a job does, then answers the first request with `reply`."""

    def peer(conn: socket.socket) -> None:
        conn.sendall(line(HELLO))
        requests = conn.makefile("rb")
        requests.readline()
        conn.sendall(reply)
        conn.settimeout(30)
        while requests.readline():  # open until the client hangs up
            pass

    return peer


def says(data: bytes) -> Peer:
    return lambda conn: conn.sendall(data)


def endless(conn: socket.socket) -> None:
    """One line that never ends: the peer writes until the client hangs up."""
    chunk = b"x" * (1 << 20)
    for _ in range(4 * MAX_MESSAGE // len(chunk)):
        conn.sendall(chunk)


def chatty(conn: socket.socket) -> None:
    """Greets, then sends well-formed events for ever and never answers the request."""
    conn.sendall(line(HELLO))
    event = line({"type": "event", "event": {"seq": 1, "ts": 1.0, "state": "running"}})
    burst = event * 1000
    while True:
        conn.sendall(burst)


def silent(conn: socket.socket) -> None:
    conn.settimeout(30)
    conn.recv(1)  # until the client gives up and hangs up


@pytest.fixture
def fake_job() -> Iterator[Callable[[Peer], Path]]:
    """`fake_job(peer)`: a socket whose first connection `peer` serves."""
    where = Path(tempfile.mkdtemp(prefix="srtd-peer-", dir="/tmp"))
    threads: list[threading.Thread] = []
    servers: list[socket.socket] = []

    def start(peer: Peer) -> Path:
        path = where / f"fake-{len(servers)}.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(1)
        servers.append(server)

        def serve() -> None:
            conn, _ = server.accept()
            with conn, contextlib.suppress(OSError):  # the client hung up, as it should
                peer(conn)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        return path

    yield start
    for server in servers:
        server.close()
    for thread in threads:
        thread.join(timeout=5)


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


KINDS: dict[str, tuple[Peer, str]] = {
    "garbage": (says(b"\x00\xff garbage \x1b[31m\n"), "not an attach message: not a JSON object"),
    "an endless line": (endless, f"not an attach message: a line longer than {MAX_MESSAGE} bytes"),
    "deep JSON": (says(deep(200_000) + b"\n"), f"not an attach message: nested deeper than {MAX_DEPTH} levels"),
    "deep JSON inside a hello": (
        says(line({**HELLO, "x": json.loads(deep(MAX_DEPTH + 5))})),
        f"not an attach message: nested deeper than {MAX_DEPTH} levels",
    ),
    "a NaN": (says(b'{"type": "hello", "protocol": 1, "started": NaN}\n'), "not an attach message: not a JSON object"),
    "an unknown message": (says(line({"type": "surprise"})), "not an attach message: unknown message type 'surprise'"),
    "a hello of the wrong shape": (
        says(line({**HELLO, "job_id": ["x"]})),
        "not an attach message: a hello message whose job_id is wrong: Input should be a valid string",
    ),
    "half a message": (says(b'{"type": "hel'), "the connection ended inside a message"),
    "silence": (silent, "no answer within 10 s"),
    "events for ever and no reply": (chatty, "no reply to snapshot within 10 s"),
    "a snapshot of the wrong shape": (
        hello_then(line({"type": "snapshot", "id": 1, "seq": 3, "units": [{"name": 5}]})),
        "not an attach message: a snapshot message whose name is wrong: Input should be a valid string",
    ),
    "a snapshot whose units are not a list": (
        hello_then(line({"type": "snapshot", "id": 1, "seq": 3, "units": "abc"})),
        "not an attach message: a snapshot message whose units is wrong: Input should be a valid list",
    ),
    "a snapshot in an unknown state": (
        hello_then(line({"type": "snapshot", "id": 1, "seq": 3, "state": "dancing", "units": []})),
        "not an attach message: a snapshot message whose state is wrong: Input should be",
    ),
    "an event of the wrong shape": (
        hello_then(line({"type": "snapshot", "id": 1, "seq": 3, "units": []}) + line({"type": "event", "event": {}})),
        "not an attach message: a event message whose event.seq is wrong: Field required",
    ),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_whatever_the_peer_sends_the_client_says_one_line_naming_the_socket_and_exits_4(
    kind: str, fake_job: Callable[[Peer], Path], tmp_path: Path
) -> None:
    peer, why = KINDS[kind]
    sock = fake_job(peer)
    result = bounded("attach", str(sock), "--once", cwd=tmp_path)
    assert result.code == 4, result.stderr
    assert one_line(result.stderr).startswith(f"srtd: {sock}: {why}")


def test_a_jobs_error_message_is_quoted_on_one_bounded_line(fake_job: Callable[[Peer], Path], tmp_path: Path) -> None:
    refusal = {"type": "error", "error": "refused", "id": 1, "message": "no\nunit " + "x" * 5000}
    sock = fake_job(hello_then(line(refusal)))
    result = bounded("restart", str(sock), "u", cwd=tmp_path)
    assert result.code == 4
    said = one_line(result.stderr)
    assert said.startswith("srtd: no\\nunit xxx")
    assert said.endswith("x...")
    assert len(said) < 600


def test_a_log_directory_whose_pointer_is_deep_json_is_exit_4(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "attach.json").write_bytes(deep(200_000))
    result = bounded("attach", str(tmp_path / "logs"), "--once", cwd=tmp_path)
    assert result.code == 4
    assert one_line(result.stderr) == (
        f"srtd: {tmp_path / 'logs'} has no attach.json: the job is not running (or ran without a socket)"
    )
