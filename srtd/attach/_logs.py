"""`srtd logs`: a unit's log read from the job's log directory, wherever the job runs.

The journal names each attempt's log (`detail.log` of its `starting` event, folded
into `UnitView.log`); a restarted unit's crashed attempt was moved to `<log>.<n>`
and the new attempt writes `<log>` afresh.  Following (`-f`) reads the file as it
grows and starts over when `<log>` is a new file (a restart), until the job's
journal has its final event.  Where the log directory is not readable from here,
the CLI asks the job itself (`tail` through its socket or a relay step).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from srtd._files import open_read, within
from srtd.attach._jobs import journal_view
from srtd.errors import AttachError
from srtd.events import FINAL_JOB_STATES

FOLLOW_POLL = 0.2  # seconds between looks at a followed log
_CHUNK = 64 * 1024


def unit_logs(log_dir: Path) -> dict[str, str | None]:
    """Every unit of the job and its current attempt's log, in plan order."""
    view = journal_view(log_dir)
    if view is None:
        raise AttachError(f"{log_dir}: no readable journal (is it a job's log directory?)")
    return {name: unit.log for name, unit in view.units.items()}


def unit_log(log_dir: Path, unit: str) -> Path:
    logs = unit_logs(log_dir)
    if unit not in logs:
        raise AttachError(f"no unit {unit!r} in the job of {log_dir} (units: {', '.join(logs)})")
    log = logs[unit]
    if log is None:
        raise AttachError(f"{unit} has not started: it has no log yet")
    # The journal is a file anyone who can write the log directory can edit: the log it
    # names is read only when it lies inside that directory, links resolved.
    if not within(os.path.realpath(log_dir), os.path.realpath(log)):
        raise AttachError(f"{log_dir}: the journal names {log} as {unit}'s log, outside the log directory; refusing it")
    return Path(log)


def open_log(path: Path) -> BinaryIO:
    """The log for reading: a regular file only, its final name no link, and no FIFO's block."""
    return open(open_read(path, follow=False, error=AttachError), "rb")


def _ended(log_dir: Path) -> bool:
    view = journal_view(log_dir)
    return view is not None and view.state in FINAL_JOB_STATES


def follow_log(path: Path, log_dir: Path, *, poll: float = FOLLOW_POLL) -> Iterator[bytes]:
    """The log's bytes from its start, then as they are written; a new file at `path` (a
    restart) is read from its start; ends once the job has ended and the file is read out."""
    handle = None
    inode = None
    while True:
        if handle is None:
            try:
                handle = open_log(path)  # held across the loop; closed below
                inode = os.fstat(handle.fileno()).st_ino
            except OSError:
                handle = None
        data = handle.read(_CHUNK) if handle is not None else b""
        if data:
            yield data
            continue
        try:
            replaced = os.stat(path).st_ino != inode
        except OSError:
            replaced = handle is not None
        if replaced and handle is not None:
            handle.close()
            handle = None
            continue
        if _ended(log_dir):
            if handle is not None:
                handle.close()
            return
        time.sleep(poll)
