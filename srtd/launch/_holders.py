"""Whether a local TCP port is free, and who holds it, in words, as far as this user may
see (`srtd run`'s port block, and the local launcher's check before a first attempt).

The kernel lists every TCP socket in `/proc/net/tcp` and `/proc/net/tcp6` with its local
port, its owner's uid and its inode; the process is the one whose `/proc/<pid>/fd` links
to `socket:[<inode>]`.  Another user's descriptors cannot be read (unless srtd runs as
root), so for those the uid is all there is to say.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import socket
from pathlib import Path

PROC = Path("/proc")
TIME_WAIT = "06"  # a closed connection's remains: it does not keep a port from being bound
_COMMAND_LIMIT = 80


def bind_errno(port: int) -> int | None:
    """None when `port` can be bound on every address now, else why not (EADDRINUSE, EACCES)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return e.errno
            raise
    return None


def _sockets_on(port: int, proc: Path) -> list[tuple[int, int]]:
    """(uid, inode) of the TCP sockets bound to `port` (IPv4 and IPv6)."""
    found: list[tuple[int, int]] = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] == TIME_WAIT:
                continue
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port:
                found.append((int(fields[7]), int(fields[9])))
    return found


def _process_with(inodes: set[int], proc: Path) -> int | None:
    """The first pid with a descriptor on one of `inodes`, among the processes we may read."""
    links = {f"socket:[{inode}]" for inode in inodes}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # another user's, or it ended meanwhile
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in links:
                        return int(entry.name)
    return None


def _command(pid: int, proc: Path) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return text if len(text) <= _COMMAND_LIMIT else text[: _COMMAND_LIMIT - 3] + "..."


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def port_holder(port: int, proc: Path = PROC) -> str:
    """`pid 123 (python3 -m http.server 8000)`, `a process of user bob`, or why it is unknown."""
    sockets = _sockets_on(port, proc)
    if not sockets:
        return "a process this user cannot see"
    inodes = {inode for _, inode in sockets if inode}
    pid = _process_with(inodes, proc) if inodes else None
    if pid is not None:
        return f"pid {pid} ({_command(pid, proc)})"
    return f"a process of user {_user(sockets[0][0])}"
