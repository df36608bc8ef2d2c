"""The cost of watching: srtd (`srtd run`, a process of its own) with N idle or chatty units."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from perf._common import CPU_CLOCK, journal_events, measure_cpu, plan, stop_process, unit, wait_until
from tests.command import SRTD

FATAL = "FATAL-BENCH unrecoverable"
WRITER = Path(__file__).resolve().parent / "_writer.py"


def _state_ts(log_dir: Path, state: str) -> float | None:
    for e in journal_events(log_dir):
        if e.get("state") == state and e.get("unit") is None:
            return float(e["ts"])
    return None


def watch_case(n: int, mode: str, *, chatty: bool, window: float) -> dict[str, Any]:
    """One `srtd run` with `n` units of `sleep`; CPU and RSS over `window` s once running;
    then a fatal line in one log, and the time until the job stops for it."""
    with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp:
        root = Path(tmp)
        log_dir = root / "logs"
        units = [unit(f"u{i:04d}", ["sleep", "3600"], fatal_patterns=(FATAL,)) for i in range(n)]
        plan_path = root / "plan.json"
        plan_path.write_text(plan(units, log_dir, hold=True, name=f"watch-{n}").dumps())
        env = {**os.environ, "SRTD_LOG_WATCH": mode}
        began = time.monotonic()
        proc = subprocess.Popen(
            [*SRTD, "run", str(plan_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        writer: subprocess.Popen[str] | None = None
        try:
            if not wait_until(lambda: _state_ts(log_dir, "running") is not None, 120, step=0.25):
                raise RuntimeError(f"srtd with {n} units never reached running")
            all_running = time.monotonic() - began
            time.sleep(1.0)  # the launch burst is over
            lines_per_s = 0.0
            if chatty:
                logs = [str(log_dir / f"u{i:04d}.log") for i in range(n)]
                writer = subprocess.Popen(
                    [sys.executable, "-S", str(WRITER), "--rate", "10", *logs], stdout=subprocess.PIPE, text=True
                )
                time.sleep(1.0)
            cost = measure_cpu(proc.pid, window)
            if writer is not None:
                writer.terminate()
                out, _ = writer.communicate(timeout=30)
                lines, seconds = out.split()
                lines_per_s = int(lines) / float(seconds)
            written = time.time()
            with open(log_dir / "u0000.log", "a") as f:
                f.write(FATAL + "\n")
            if not wait_until(lambda: _state_ts(log_dir, "stopping") is not None, 30, step=0.01):
                raise RuntimeError("srtd did not stop for the fatal line")
            stopping = _state_ts(log_dir, "stopping")
            assert stopping is not None
            proc.wait(120)
        finally:
            if writer is not None and writer.poll() is None:
                writer.kill()
            stop_process(proc)
    return {
        "units": n,
        "watch": mode,
        "chatty": chatty,
        "launch_to_running_s": round(all_running, 2),
        **cost,
        "lines_per_s": round(lines_per_s),
        "fatal_line_ms": round((stopping - written) * 1000, 1),
    }


def watching(quick: bool) -> dict[str, Any]:
    window = 3.0 if quick else 6.0
    sizes = (100, 1000) if quick else (100, 500, 1000)
    cases = [watch_case(n, "auto", chatty=False, window=window) for n in sizes]
    cases.append(watch_case(1000, "poll", chatty=False, window=window))
    cases.append(watch_case(1000, "auto", chatty=True, window=window))
    cases.append(watch_case(1000, "poll", chatty=True, window=window))
    idle_1000 = next(c for c in cases if c["units"] == 1000 and c["watch"] == "auto" and not c["chatty"])
    chatty_1000 = next(c for c in cases if c["units"] == 1000 and c["watch"] == "auto" and c["chatty"])
    fatal_local = max(c["fatal_line_ms"] for c in cases if c["watch"] == "auto")
    fatal_poll = max(c["fatal_line_ms"] for c in cases if c["watch"] == "poll")
    met = {
        "1000 idle units < 5 % of a core": idle_1000["cpu_percent"] < 5,
        "1000 units at 10 lines/s < 30 % of a core": chatty_1000["cpu_percent"] < 30,
        "RSS with 1000 units < 150 MB": idle_1000["rss_mib"] < 150,
        "fatal line ≤ 100 ms (inotify)": fatal_local <= 100,
        "fatal line ≤ 1 s (poll fallback)": fatal_poll <= 1000,
    }
    return {"title": "Cost of watching", "window_s": window, "cpu_clock": CPU_CLOCK, "cases": cases, "met": met}


if __name__ == "__main__":
    print(json.dumps(watch_case(int(sys.argv[1]), sys.argv[2], chatty=sys.argv[3] == "chatty", window=3.0)))
