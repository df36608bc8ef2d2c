"""A benchmark client for tests that marks one measurement window around its command, as srt-slurm's do.

    python window_client.py DIR CONCURRENCY [--skip] -- COMMAND...

Waits a moment (the power sampler has readings before the window), writes
`DIR/custom_c<N>.json` (running), runs COMMAND, marks the window completed (or
failed), lingers 0.3 s as a client writing its results would, and exits with COMMAND's
code.  `--skip` runs COMMAND without any window.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def mark(path: Path, concurrency: int, start: float, end: float | None, code: int | None) -> None:
    status = "running" if end is None else "completed" if code == 0 else "failed"
    doc = {
        "schema_version": 1,
        "clock_source": "head_node_unix_clock",
        "benchmark_type": "custom",
        "concurrency": concurrency,
        "status": status,
        "benchmark_start_time_unix": start,
        "benchmark_end_time_unix": end,
        "duration": None if end is None else end - start,
        "reason": None if status != "failed" else f"exit {code}",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def main() -> int:
    split = sys.argv.index("--")
    head, command = sys.argv[1:split], sys.argv[split + 1 :]
    skip = "--skip" in head
    folder, concurrency = Path(head[0]), int(head[1])
    if skip:
        return subprocess.run(command, check=False).returncode
    time.sleep(1.0)
    path = folder / f"custom_c{concurrency}.json"
    start = time.time()
    mark(path, concurrency, start, None, None)
    code = subprocess.run(command, check=False).returncode
    time.sleep(0.5)  # a window long enough for several readings
    mark(path, concurrency, start, time.time(), code)
    # A real client writes its results after the window; lingering as long lets the sampler's
    # next reading (every 0.1 s in the tests) land after the window's end.  srtd's own read at
    # the client's exit races the teardown of the exporters (issue #36's note, stop 41).
    time.sleep(0.3)
    return code


if __name__ == "__main__":
    sys.exit(main())
