"""This user's private runtime directory: where attach sockets and port-block claims live.

`$SRTD_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/srtd`, else `/tmp/srtd-<uid>`, private to
its user (made with mode 0700; an existing one must be owned by them and writable by
nobody else: a shared directory is refused, never chmodded).  A bottom module: the
launchers (port blocks) and attach (sockets) both use it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from srtd.errors import SrtdError


def runtime_dir() -> Path:
    return _chosen()[0]


def _chosen() -> tuple[Path, str]:
    """The runtime directory and what chose it (a variable, or the default)."""
    explicit = os.environ.get("SRTD_RUNTIME_DIR")
    if explicit:
        return Path(explicit), "$SRTD_RUNTIME_DIR"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "srtd", "$XDG_RUNTIME_DIR/srtd"
    return Path(f"/tmp/srtd-{os.getuid()}"), "the default runtime directory"


def _named(path: Path) -> str:
    """`path`, and the variable that names it when one does (the user's to change)."""
    chosen, source = _chosen()
    return f"{path} ({source})" if path == chosen else str(path)


def private_dir(path: Path, error: type[SrtdError], purpose: str) -> Path:
    """Create `path` (and its missing parents) with mode 0700, or check that the existing
    one is ours and nobody else's to write; `error` says otherwise (`purpose`: what the
    directory is for, "put a socket there").

    A directory srtd did not create is never chmodded: a shared one (`/tmp`, a
    group's scratch) is refused, not taken over.
    """
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    try:
        for directory in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory, 0o700)  # the umask can only take bits away
        st = os.lstat(path)
    except OSError as e:
        raise error(f"cannot create the runtime directory {_named(path)}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise error(f"{_named(path)} is not a directory owned by uid {os.getuid()}; refusing to {purpose}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise error(
            f"{_named(path)} is writable by others (mode {stat.S_IMODE(st.st_mode):o}); refusing to {purpose}"
            " (set SRTD_RUNTIME_DIR to a directory of your own)"
        )
    return path
