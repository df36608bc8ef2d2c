"""inotify_simple, imported without `ctypes.util` and without the `ldconfig -p` it runs.

inotify_simple finds the C library with `ctypes.util.find_library("c")` on its first
`INotify`.  On Linux that runs `ldconfig -p` (a subprocess, about 6 ms on every job's
start), and importing `ctypes.util` loads tempfile, random and hashlib with it: 0.85 MiB
held for the supervisor's whole life.  Its functions (`inotify_init1`, `inotify_add_watch`,
`inotify_rm_watch`) are in the C library every Python process is linked against, so
`CDLL(None)` (the process's own symbols, `dlopen(NULL)`) serves as well.

So inotify_simple is imported here with a stand-in `ctypes.util` whose `find_library`
answers None: inotify_simple then opens `CDLL(None)` itself.  The stand-in lasts only
while inotify_simple is imported: a later `import ctypes.util` gets the real module.
When something imported inotify_simple before, this changes nothing.
"""

from __future__ import annotations

import sys
import types

_STANDIN = "ctypes.util" not in sys.modules and "inotify_simple" not in sys.modules
if _STANDIN:
    _util = types.ModuleType("ctypes.util", "srtd's stand-in while inotify_simple is imported")
    _util.find_library = lambda name: None  # type: ignore[attr-defined]  # CDLL(None): our own libc
    sys.modules["ctypes.util"] = _util
try:
    from inotify_simple import INotify
finally:
    if _STANDIN and sys.modules.get("ctypes.util") is _util:
        del sys.modules["ctypes.util"]

__all__ = ["INotify"]
