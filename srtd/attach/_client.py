"""The client side of the attach protocol: plain blocking sockets, one per command."""

from __future__ import annotations

import re
import select
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srtd._value import value_class
from srtd.attach._messages import read_message, said
from srtd.attach._paths import (
    dead_message,
    forget_stale,
    gone_pid,
    is_live,
    pointer_facts,
    pointer_job_id,
    read_record,
    resolve,
    sockets,
)
from srtd.attach._protocol import MAX_MESSAGE, PROTOCOL, BadFrame, encode
from srtd.errors import AttachError, ControlError

if TYPE_CHECKING:
    from srtd.attach._relay import Relay


RECEIVE_SIZE = 65536  # bytes read from the socket at a time


class Connection:
    """One connection to a job's socket, on this node or through a relay step: the greeting,
    then requests and messages."""

    def __init__(self, path: Path, *, timeout: float | None = 10.0, relay: Relay | None = None) -> None:
        self.path = path
        self.relay = relay
        self.where = relay.where if relay is not None else str(path)  # what error messages name
        if relay is not None:
            self._sock = relay.sock
            self._sock.settimeout(timeout)
            self._greet()
            return
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(path))
        except PermissionError:
            self._sock.close()
            raise AttachError(f"{path}: permission denied (the job belongs to another user)") from None
        except (ConnectionRefusedError, FileNotFoundError):
            self._sock.close()
            raise AttachError(_not_running(path)) from None
        except OSError as e:
            self._sock.close()
            raise AttachError(f"{path}: cannot connect: {e.strerror or e}") from None
        self._greet()

    def _greet(self) -> None:
        self._next_id = 0
        # Read by hand, not through `makefile`: `ready()` must know whether a line waits in
        # the buffer, and a timed-out read must leave the connection usable.
        self._buffer = bytearray()
        self._scanned = 0  # the buffer holds no newline before this
        try:
            hello = self.receive()
        except AttachError:
            self.close()
            raise
        if hello is None:
            relay_said = f": {self.relay.said()}" if self.relay is not None else ""
            self.close()
            raise AttachError(f"{self.where}: the job closed the connection{relay_said}")
        if hello["type"] == "error":
            self.close()
            raise AttachError(said(hello["message"]))
        if hello["type"] != "hello" or hello.get("protocol") != PROTOCOL:
            self.close()
            theirs = said(repr(hello.get("protocol")))[:60]
            raise AttachError(f"{self.where}: speaks attach protocol {theirs}, this srtd speaks {PROTOCOL}")
        self.hello: dict[str, Any] = hello

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def send(self, **request: Any) -> None:
        try:
            self._sock.sendall(encode(request))
        except OSError as e:
            raise AttachError(f"{self.where}: connection lost: {e.strerror or e}") from None

    def _readline(self) -> bytes:
        """The next line; what is left (b"" at a clean end) when the server closed the connection."""
        while (end := self._buffer.find(b"\n", self._scanned)) < 0:
            if len(self._buffer) > MAX_MESSAGE:  # no line this long is an attach message
                end = MAX_MESSAGE
                break
            self._scanned = len(self._buffer)
            try:
                chunk = self._sock.recv(RECEIVE_SIZE)
            except TimeoutError:
                raise
            except OSError as e:
                raise AttachError(f"{self.where}: connection lost: {e.strerror or e}") from None
            if not chunk:
                end = len(self._buffer) - 1
                break
            self._buffer += chunk
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        self._scanned = 0
        return line

    def ready(self, timeout: float) -> bool:
        """Whether `receive` would return within `timeout` seconds (a message, or the end)."""
        if b"\n" in self._buffer:
            return True
        readable, _, _ = select.select([self._sock], [], [], timeout)
        return bool(readable)

    def receive(self) -> dict[str, Any] | None:
        """The next message, checked (`_messages`); None when the server closed the connection.

        Whatever the peer sends, the outcome is a message or one `AttachError` naming the
        socket: a line is read to `MAX_MESSAGE` bytes at most, silence to the timeout.
        """
        try:
            line = self._readline()
        except TimeoutError:
            raise AttachError(f"{self.where}: no answer within {self._sock.gettimeout():g} s") from None
        if not line:
            return None
        if not line.endswith(b"\n"):
            if len(line) > MAX_MESSAGE:
                raise AttachError(f"{self.where}: not an attach message: a line longer than {MAX_MESSAGE} bytes")
            raise AttachError(f"{self.where}: the connection ended inside a message")
        try:
            return read_message(line)
        except BadFrame as e:
            raise AttachError(f"{self.where}: not an attach message: {e}") from None

    def messages(self) -> Iterator[dict[str, Any]]:
        while (message := self.receive()) is not None:
            yield message

    def messages_or_quiet(self, quiet: float) -> Iterator[dict[str, Any] | None]:
        """The messages, and None each time none has come for `quiet` seconds."""
        while True:
            if not self.ready(quiet):
                yield None
            elif (message := self.receive()) is not None:
                yield message
            else:
                return

    def request(self, cmd: str, **fields: Any) -> dict[str, Any]:
        """Send a request and return its reply (an error reply raises).

        Messages of a running subscription that arrive first are skipped: the reply
        is the message carrying the request's id.  With a timeout, the reply is due within
        it, however many other messages come first (a peer cannot keep us reading forever).
        """
        self._next_id += 1
        request_id = self._next_id
        self.send(cmd=cmd, id=request_id, **fields)
        timeout = self._sock.gettimeout()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise AttachError(f"{self.where}: no reply to {cmd} within {timeout:g} s")
            reply = self.receive()
            if reply is None:
                raise AttachError(f"{self.where}: the job closed the connection")
            kind = reply.get("type")
            if kind == "overflow":
                raise AttachError(f"{self.where}: {said(reply['message'])}")
            if kind == "error" and reply.get("id") in (request_id, None):
                raise ControlError(said(reply["message"]))
            if reply.get("id") == request_id:
                return reply

    def close(self) -> None:
        self._sock.close()
        if self.relay is not None:
            self.relay.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _not_running(path: Path) -> str:
    """Why nothing answers on `path`: a dead job (its srtd is gone: the socket is removed), or not known."""
    facts = read_record(path)
    pid = gone_pid(facts)
    if facts is None or pid is None:
        return f"{path}: the job is not running (stale socket)"
    forget_stale(path)
    return dead_message(facts, pid)


def connect(job: str | Path, *, timeout: float | None = 10.0) -> Connection:
    """A connection to JOB (a job id, log directory or socket path): to its socket when it is on
    this node, else through a relay step on its batch host (`_relay`).  A job whose srtd is gone
    is said to be dead (`AttachError`)."""
    facts = pointer_facts(Path(job)) if Path(job).is_dir() else None
    pid = gone_pid(facts)
    if facts is not None and pid is not None:
        if isinstance(facts.get("socket"), str):
            forget_stale(Path(facts["socket"]))
        raise AttachError(dead_message(facts, pid))
    try:
        path = resolve(str(job))
    except AttachError as miss:
        relay = _relay_for(str(job), miss)
        return Connection(Path(relay.where), timeout=timeout, relay=relay)
    if not path.exists() and Path(job).is_dir():
        # attach.json names a socket on another node (the log dir is shared, the runtime dir is not)
        job_id = pointer_job_id(Path(job))
        if job_id is not None:
            relay = _relay_for(job_id, AttachError(f"{path}: not on this node"), log_dir=str(job))
            return Connection(Path(relay.where), timeout=timeout, relay=relay)
    return Connection(path, timeout=timeout)


_SLURM_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")


def _relay_for(job: str, miss: AttachError, log_dir: str | None = None) -> Relay:
    """A relay into Slurm job `job`, if it is a running job of this user; else why not (`miss` if not Slurm's)."""
    if not _SLURM_JOB_ID.match(job) or shutil.which("srun") is None:
        raise miss
    from srtd.attach._relay import open_relay
    from srtd.errors import LaunchError
    from srtd.launch import find_job

    try:
        found = find_job(job)
    except LaunchError as e:
        raise AttachError(f"{miss}; and Slurm does not answer: {e}") from None
    if found is None:
        raise AttachError(f"{miss}, and Slurm lists no job {job} of yours")
    mark = found.mark or {}
    log_dir = log_dir or (mark["log_dir"] if isinstance(mark.get("log_dir"), str) else None)
    if found.state == "PENDING":
        raise AttachError(f"job {job} is pending ({found.reason or 'queued'}): it has no socket until it starts")
    if found.state != "RUNNING" or not found.batch_host:
        replay = f"; its journal: srtd attach --replay {log_dir}" if log_dir else ""
        raise AttachError(f"job {job} is not running ({found.state.lower()}){replay}")
    return open_relay(job, found.batch_host, log_dir)


@value_class
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
        except AttachError:
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
