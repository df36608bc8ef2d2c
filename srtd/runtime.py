"""This user's private runtime directory: where attach sockets and port-block claims live.

`$SRTD_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/srtd`, else `/tmp/srtd-<uid>`, private to
its user (mode 0700, owned by them: a directory someone else owns is refused, not
used).  A bottom module: the launchers (port blocks) and attach (sockets) both use it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from srtd.errors import SrtdError


def runtime_dir() -> Path:
    explicit = os.environ.get("SRTD_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "srtd"
    return Path(f"/tmp/srtd-{os.getuid()}")


def private_dir(path: Path, error: type[SrtdError], purpose: str) -> Path:
    """Create `path` (0700) or check that the existing one is ours and private; `error` says
    otherwise (`purpose`: what the directory is for, "put a socket there")."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise error(f"cannot create the runtime directory {path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise error(f"{path} is not a directory owned by uid {os.getuid()}; refusing to {purpose}")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path
