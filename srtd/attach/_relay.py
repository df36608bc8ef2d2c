"""The relay: a job's attach socket reached from off its node, through Slurm itself.

The socket lives on the batch host (where `srtd run` is the batch shell), private to
its user.  From anywhere else (a login node) a client starts one short step inside the
job's own allocation, on the batch host:

    srun --jobid=J --overlap --nodes=1 --ntasks=1 --nodelist=<batch host>
         --job-name=srtd-relay --quiet --unbuffered <srtd> relay J [--log-dir D]

whose task (`pump`) connects to the socket there and copies bytes both ways between
it and its stdin/stdout, which srun carries to the client.  The client's end is one
side of a socketpair handed to srun as its stdin and stdout, so the attach client
reads and writes it exactly as a Unix socket: the same protocol, the same messages,
the same errors.  Slurm's authentication decides who may start a step in the job (no
TCP listener, no ssh); the step's name `srtd-relay` (`RELAY_STEP`) says what it is,
and it is never one of the job's units.  It ends when either side leaves: the client
closing its end is EOF on the task's stdin; the job closing the socket ends the task.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import tempfile
from dataclasses import field
from pathlib import Path
from typing import IO

from srtd._value import value_class
from srtd.attach._paths import read_pointer, resolve, srtd_command
from srtd.attach._protocol import error
from srtd.errors import EXIT_ATTACH, EXIT_OK, AttachError

RELAY_STEP = "srtd-relay"  # the relay step's name in squeue
RELAY_VERB = "relay"  # the hidden `srtd relay` command the step runs
CLOSE_WAIT = 10.0  # seconds the client waits for srun to end after it has left
_CHUNK = 64 * 1024


def relay_argv(job_id: str, batch_host: str, log_dir: str | None = None, srun: str = "srun") -> list[str]:
    """The srun line of a relay step into job `job_id` on its batch host."""
    argv = [
        srun,
        f"--jobid={job_id}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={batch_host}",
        f"--job-name={RELAY_STEP}",
        "--quiet",
        "--unbuffered",
        *srtd_command(),
        RELAY_VERB,
        job_id,
    ]
    if log_dir:
        argv += ["--log-dir", log_dir]
    return argv


@value_class(frozen=False)
class Relay:
    """A running relay step: the client's end of its pipe, and its srun."""

    job_id: str
    host: str
    sock: socket.socket
    popen: subprocess.Popen[bytes]
    errors: IO[bytes]
    closed: bool = field(default=False)

    @property
    def where(self) -> str:
        return f"job {self.job_id} (relay on {self.host})"

    def said(self) -> str:
        """srun's last line on stderr (why a relay ended without an answer)."""
        with contextlib.suppress(OSError):
            self.errors.seek(0)
            lines = [ln.strip() for ln in self.errors.read().decode(errors="replace").splitlines() if ln.strip()]
            if lines:
                return lines[-1]
        code = self.popen.poll()
        return "srun said nothing" if code is None else f"srun exited with status {code}"

    def close(self) -> None:
        """Leave: EOF to the relay's task, then wait (bounded) until srun and its step have ended."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=CLOSE_WAIT)
                break
            except subprocess.TimeoutExpired:
                continue
        self.errors.close()


def open_relay(job_id: str, batch_host: str, log_dir: str | None = None) -> Relay:
    """Start a relay step into `job_id` on `batch_host`; its socket speaks the attach protocol."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    errors = tempfile.TemporaryFile()  # noqa: SIM115  (the Relay holds it open until it closes)
    try:
        popen = subprocess.Popen(
            relay_argv(job_id, batch_host, log_dir),
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            stderr=errors,
            start_new_session=True,  # a Ctrl-C at the terminal is the client's to handle, not srun's
            close_fds=True,
        )
    except OSError as e:
        ours.close()
        errors.close()
        raise AttachError(f"job {job_id}: cannot start the relay step: {e.strerror or e}") from None
    finally:
        theirs.close()
    return Relay(job_id, batch_host, ours, popen, errors)


# ---------------------------------------------------------------- the step's side


def relay_socket(job_id: str, log_dir: Path | None) -> Path:
    """The job's socket on this node: the log dir's pointer when it names one here, else by job id."""
    if log_dir is not None:
        pointer = read_pointer(log_dir)
        if pointer is not None and pointer.exists():
            return pointer
    return resolve(job_id)


def pump(path: Path, stdin: int = 0, stdout: int = 1) -> int:
    """Copy bytes between the socket at `path` and stdin/stdout until either side ends; the exit code."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError as e:
        conn.close()
        why = "the job is not running (stale socket)" if isinstance(e, ConnectionRefusedError) else e.strerror
        _say(stdout, f"{path}: {why}")
        return EXIT_ATTACH
    with conn, selectors.DefaultSelector() as sel:
        sel.register(stdin, selectors.EVENT_READ, "in")
        sel.register(conn, selectors.EVENT_READ, "sock")
        while True:
            for key, _ in sel.select():
                data = os.read(stdin, _CHUNK) if key.data == "in" else _recv(conn)
                if not data:
                    return EXIT_OK  # the client left, or the job closed the connection
                if key.data == "in":
                    conn.sendall(data)
                else:
                    _write_all(stdout, data)


def _recv(conn: socket.socket) -> bytes:
    try:
        return conn.recv(_CHUNK)
    except ConnectionResetError:
        return b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _say(fd: int, message: str) -> None:
    """An error in the protocol's own shape, where the client expects the greeting."""
    with contextlib.suppress(OSError):
        _write_all(fd, (json.dumps(error("not-running", message), separators=(",", ":")) + "\n").encode())


def run_relay(job_id: str, log_dir: Path | None, stdin: int = 0, stdout: int = 1) -> int:
    """The hidden `srtd relay JOB` command: find the socket on this node and pump."""
    try:
        path = relay_socket(job_id, log_dir)
    except AttachError as e:
        _say(stdout, f"{e} on {os.environ.get('SLURMD_NODENAME') or socket.gethostname()}")
        return EXIT_ATTACH
    try:
        return pump(path, stdin, stdout)
    except (BrokenPipeError, ConnectionResetError):
        return EXIT_OK


__all__ = ["RELAY_STEP", "Relay", "open_relay", "relay_argv", "run_relay"]
