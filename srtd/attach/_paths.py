"""Where a job's attach socket lives, and how a client finds it.

The socket is `<runtime dir>/<job id>.sock`; the runtime directory is
`$SRTD_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/srtd`, else `/tmp/srtd-<uid>`, private to
its user (mode 0700, owned by them: a directory someone else owns is refused, not
used).  The job's log directory gets `attach.json` naming the socket, so a job can
also be found from its logs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

from srtd._files import SMALL_LIMIT, read_back, write_under
from srtd.errors import AttachError, FileRefused
from srtd.runtime import private_dir as _private_dir
from srtd.runtime import runtime_dir

POINTER_NAME = "attach.json"
SOCKET_SUFFIX = ".sock"
_MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with its terminating NUL
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def srtd_command() -> list[str]:
    """How to run the srtd that is running now: what a batch script, or a relay step, execs."""
    beside = Path(sys.executable).parent / "srtd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "srtd"]


def private_dir(path: Path) -> Path:
    """Create `path` (0700) or check that the existing one is ours and private."""
    return _private_dir(path, AttachError, "put a socket there")


def socket_name(job_id: str) -> str:
    return _UNSAFE.sub("_", job_id) + SOCKET_SUFFIX


def socket_path(job_id: str, directory: Path | None = None) -> Path:
    path = (directory or runtime_dir()) / socket_name(job_id)
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        raise AttachError(f"socket path {path} is longer than {_MAX_SOCKET_PATH} bytes; set SRTD_RUNTIME_DIR shorter")
    return path


def is_live(path: Path, timeout: float = 1.0) -> bool:
    """Does a server answer on `path`?  False for a stale socket left by a killed srtd."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True  # something is there and refuses us (permissions): not ours to remove
        return True


def write_pointer(log_dir: Path, path: Path, job_id: str) -> Path:
    pointer = log_dir / POINTER_NAME
    document = json.dumps({"socket": str(path), "job_id": job_id, "pid": os.getpid()}) + "\n"
    write_under(log_dir, pointer, document, error=FileRefused)
    return pointer


def read_pointer(log_dir: Path) -> Path | None:
    try:
        data = json.loads(read_back(log_dir / POINTER_NAME, limit=SMALL_LIMIT, error=ValueError))
        return Path(data["socket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pointer_job_id(log_dir: Path) -> str | None:
    """The job id `attach.json` names."""
    try:
        job_id = json.loads(read_back(log_dir / POINTER_NAME, limit=SMALL_LIMIT, error=ValueError))["job_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return job_id if isinstance(job_id, str) else None


def resolve(job: str) -> Path:
    """The socket of JOB: a job id, a log directory or a socket path."""
    candidate = Path(job)
    if candidate.is_dir():
        pointer = read_pointer(candidate)
        if pointer is None:
            raise AttachError(f"{candidate} has no {POINTER_NAME}: the job is not running (or ran without a socket)")
        return pointer
    if candidate.suffix == SOCKET_SUFFIX and candidate.exists():
        return candidate
    path = socket_path(job)
    if not path.exists():
        raise AttachError(f"no running job {job!r} of yours (no socket {path})")
    return path


def sockets() -> list[Path]:
    """Every socket in this user's runtime directory, oldest first."""
    directory = runtime_dir()
    try:
        found = [p for p in directory.iterdir() if p.suffix == SOCKET_SUFFIX]
    except OSError:
        return []
    return sorted(found, key=lambda p: (_mtime(p), p.name))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
