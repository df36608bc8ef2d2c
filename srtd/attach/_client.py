"""The client side of the attach protocol: plain blocking sockets, one per command."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srtd.attach._paths import is_live, resolve, sockets
from srtd.attach._protocol import PROTOCOL, encode
from srtd.errors import AttachError, ControlError


class Connection:
    """One connection to a job's socket: the greeting, then requests and messages."""

    def __init__(self, path: Path, *, timeout: float | None = 10.0) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(path))
        except PermissionError:
            self._sock.close()
            raise AttachError(f"{path}: permission denied (the job belongs to another user)") from None
        except (ConnectionRefusedError, FileNotFoundError):
            self._sock.close()
            raise AttachError(f"{path}: the job is not running (stale socket)") from None
        except OSError as e:
            self._sock.close()
            raise AttachError(f"{path}: cannot connect: {e.strerror or e}") from None
        self._file = self._sock.makefile("rb")
        self._next_id = 0
        hello = self.receive()
        if hello is None:
            self.close()
            raise AttachError(f"{path}: the job closed the connection")
        if hello.get("type") == "error":
            self.close()
            raise AttachError(str(hello.get("message")))
        if hello.get("type") != "hello" or hello.get("protocol") != PROTOCOL:
            self.close()
            raise AttachError(f"{path}: speaks attach protocol {hello.get('protocol')!r}, this srtd speaks {PROTOCOL}")
        self.hello: dict[str, Any] = hello

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def send(self, **request: Any) -> None:
        try:
            self._sock.sendall(encode(request))
        except OSError as e:
            raise AttachError(f"{self.path}: connection lost: {e.strerror or e}") from None

    def receive(self) -> dict[str, Any] | None:
        """The next message; None when the server closed the connection."""
        try:
            line = self._file.readline()
        except TimeoutError:
            raise
        except OSError as e:
            raise AttachError(f"{self.path}: connection lost: {e.strerror or e}") from None
        if not line:
            return None
        message = json.loads(line)
        if not isinstance(message, dict):
            raise AttachError(f"{self.path}: not an attach message: {line[:80]!r}")
        return message

    def messages(self) -> Iterator[dict[str, Any]]:
        while (message := self.receive()) is not None:
            yield message

    def request(self, cmd: str, **fields: Any) -> dict[str, Any]:
        """Send a request and return its reply (an error reply raises).

        Messages of a running subscription that arrive first are skipped: the reply
        is the message carrying the request's id.
        """
        self._next_id += 1
        request_id = self._next_id
        self.send(cmd=cmd, id=request_id, **fields)
        while True:
            reply = self.receive()
            if reply is None:
                raise AttachError(f"{self.path}: the job closed the connection")
            kind = reply.get("type")
            if kind == "overflow":
                raise AttachError(f"{self.path}: {reply.get('message')}")
            if kind == "error" and reply.get("id") in (request_id, None):
                raise ControlError(str(reply.get("message")))
            if reply.get("id") == request_id:
                return reply

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(job: str | Path, *, timeout: float | None = 10.0) -> Connection:
    return Connection(resolve(str(job)), timeout=timeout)


@dataclass(frozen=True)
class RunningJob:
    job_id: str
    name: str
    state: str
    started: float | None
    log_dir: str
    socket: str

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "name": self.name,
            "state": self.state,
            "started": self.started,
            "log_dir": self.log_dir,
            "socket": self.socket,
        }


def running_jobs() -> list[RunningJob]:
    """This user's running jobs: every socket in the runtime directory that answers."""
    found: list[RunningJob] = []
    for path in sockets():
        if not is_live(path):
            continue
        try:
            with Connection(path, timeout=2.0) as conn:
                hello = conn.hello
        except (AttachError, TimeoutError, ValueError):
            continue
        found.append(
            RunningJob(
                job_id=str(hello.get("job_id")),
                name=str(hello.get("name")),
                state=str(hello.get("state")),
                started=hello.get("started"),
                log_dir=str(hello.get("log_dir")),
                socket=str(path),
            )
        )
    return found
