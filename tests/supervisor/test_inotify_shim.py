"""srtd/supervisor/_inotify.py: inotify_simple without ctypes.util, ldconfig or a changed ctypes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, os, sys
from srtd.supervisor._inotify import INotify
from inotify_simple import flags
watch = INotify(nonblocking=True)
watch.add_watch(sys.argv[1], flags.CREATE)
open(os.path.join(sys.argv[1], "new"), "w").close()
names = [e.name for e in watch.read(timeout=5000)]
before = sorted(m for m in ("ctypes.util", "tempfile", "random") if m in sys.modules)
import ctypes.util
print(json.dumps({"names": names, "before": before, "libc": ctypes.util.find_library("c")}))
"""


def test_inotify_works_without_ctypes_util_and_leaves_the_real_one(tmp_path: Path) -> None:
    # strace is not needed to show that no ldconfig ran: find_library is what runs it, and
    # ctypes.util (where it lives) was never imported until the probe asked for it
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True)
    said = json.loads(done.stdout)
    assert said["names"] == ["new"]  # the events arrive: the C library was found without it
    assert said["before"] == []
    assert str(said["libc"]).startswith("libc.so")  # a later import gets the real module


def test_after_ctypes_util_was_imported_the_real_one_is_kept() -> None:
    code = (
        "import ctypes.util; real = ctypes.util.find_library\n"
        "import srtd.supervisor._inotify, inotify_simple, sys\n"
        "print(inotify_simple.find_library is real, sys.modules['ctypes.util'].find_library is real)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True"]
