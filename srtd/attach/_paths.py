"""Where a job's attach socket lives, and how a client finds it.

The socket is `<runtime dir>/<job id>.sock`; the runtime directory is
`$SRTD_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/srtd`, else `/tmp/srtd-<uid>`, private to
its user (mode 0700, owned by them: a directory someone else owns is refused, not
used).  The job's log directory gets `attach.json` naming the socket, so a job can
also be found from its logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from srtd._files import SMALL_LIMIT, read_back, write_under
from srtd._json import loads_bounded
from srtd.errors import AttachError, FileRefused
from srtd.runtime import private_dir as _private_dir
from srtd.runtime import runtime_dir

POINTER_NAME = "attach.json"
SOCKET_SUFFIX = ".sock"
RECORD_SUFFIX = ".json"
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


def serving_facts(log_dir: Path, path: Path, job_id: str) -> dict[str, Any]:
    """Who serves the socket: what `attach.json` and the record beside the socket say."""
    host = socket.gethostname()
    return {"socket": str(path), "job_id": job_id, "pid": os.getpid(), "host": host, "log_dir": str(log_dir)}


def write_pointer(log_dir: Path, facts: Mapping[str, Any]) -> Path:
    """`attach.json`, in a log directory srtd may not own outright: no planted link followed."""
    pointer = log_dir / POINTER_NAME
    write_under(log_dir, pointer, json.dumps(facts) + "\n", error=FileRefused)
    return pointer


def record_path(path: Path) -> Path:
    """The record beside a socket (`<job>.json`): which srtd serves it, and the job's log directory,
    so that a socket its srtd left behind still says whose it was."""
    return path.with_suffix(RECORD_SUFFIX)


def write_record(path: Path, facts: Mapping[str, Any]) -> Path:
    record = record_path(path)
    write_under(record.parent, record, json.dumps(facts) + "\n", error=FileRefused)  # as attach.json is written
    return record


def _read_json(path: Path) -> dict[str, Any] | None:
    try:  # a regular file of a bounded size only (a FIFO there would block); deep nesting: a ValueError
        data = loads_bounded(read_back(path, limit=SMALL_LIMIT, error=ValueError))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_record(path: Path) -> dict[str, Any] | None:
    return _read_json(record_path(path))


def pointer_facts(log_dir: Path) -> dict[str, Any] | None:
    return _read_json(log_dir / POINTER_NAME)


def gone_pid(facts: Mapping[str, Any] | None) -> int | None:
    """The pid of the srtd the facts name, when it is known to be gone: it ran on this host, and no
    srtd runs under that pid now.  None when it may still run (or ran elsewhere: not ours to say)."""
    pid = (facts or {}).get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or (facts or {}).get("host") != socket.gethostname():
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return pid
    except OSError:
        return None
    return None if b"srtd" in argv else pid  # a zombie's is empty; a reused pid runs something else


def forget_stale(path: Path) -> None:
    """Remove a socket nothing answers on, and its record (its srtd is gone): only a socket of this
    user's runtime directory, whatever path a log directory's `attach.json` names."""
    if path.parent != runtime_dir() or path.suffix != SOCKET_SUFFIX:
        return
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    with contextlib.suppress(OSError):
        record_path(path).unlink()


def dead_message(facts: Mapping[str, Any], pid: int) -> str:
    log_dir = facts.get("log_dir")
    replay = f"; what it journaled: srtd attach --replay {log_dir}" if isinstance(log_dir, str) else ""
    return f"job {facts.get('job_id')} is dead: its srtd (pid {pid}) is gone without ending it{replay}"


def read_pointer(log_dir: Path) -> Path | None:
    socket_path = (pointer_facts(log_dir) or {}).get("socket")
    return Path(socket_path) if isinstance(socket_path, str) else None


def pointer_job_id(log_dir: Path) -> str | None:
    """The job id `attach.json` names."""
    job_id = (pointer_facts(log_dir) or {}).get("job_id")
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
