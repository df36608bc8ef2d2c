"""What status reporting costs a local job: wall time of `srtd run` with and without collectors.

    python perf/reporting_overhead.py [--runs 5]

Runs recipes/features/status-reporting.yaml as a whole process, `--runs` times for
each case, interleaved: no reporting; a collector that answers
(tests/programs/collector.py); a collector that accepts connections and never
answers; a port where nothing listens.  Prints min / median / max wall time and the
difference of each case's minimum to the plain job's.  The target: under 1 s for the
silent collector, about nothing for the others.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.command import run_srtd

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "recipes" / "features" / "status-reporting.yaml"
COLLECTOR = REPO / "tests" / "programs" / "collector.py"
# the job must not look like a Slurm batch step or inherit srtd / srtctl settings of this shell
DROP = ("SLURM_", "SRTD_", "SRTCTL_")


def recipe(work: Path, name: str, endpoint: str | None) -> Path:
    text = EXAMPLE.read_text()
    if endpoint is None:
        text = text[: text.index("\nreporting:") + 1]
    else:
        text = text.replace("http://127.0.0.1:8080", endpoint)
    path = work / f"{name}.yaml"
    path.write_text(text)
    return path


def once(work: Path, path: Path, run: int) -> float:
    """One successful run's wall time.  A local job uses fixed ports (the toy router's
    8000), so another job on the same machine can make it fail: such runs are redone."""
    env = {"SRTCTL_STATUS_TOKEN": "benchmark-token"}
    for attempt in range(5):
        log_dir = work / f"logs-{path.stem}-{run}-{attempt}"
        began = time.monotonic()
        done = run_srtd(
            "run",
            str(path),
            "--log-dir",
            str(log_dir),
            cwd=work,
            env=env,
            drop=("SLURM_", "SRTD_", "SRTCTL_"),
            timeout=600,
        )
        took = time.monotonic() - began
        if done.returncode == 0:
            return took
        time.sleep(1)
    raise SystemExit(f"{path.stem} run {run} failed 5 times (exit {done.returncode}):\n{done.stdout}{done.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp, socket.socket() as silent, socket.socket() as closed:
        work = Path(tmp)
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # accepts (in the kernel), never answers
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port_file = work / "collector.port"
        argv = [sys.executable, str(COLLECTOR), "--record", str(work / "rec.jsonl"), "--port-file", str(port_file)]
        collector = subprocess.Popen(argv)
        try:
            while not port_file.exists():
                time.sleep(0.05)
            cases = {
                "plain": recipe(work, "plain", None),
                "answering": recipe(work, "answering", f"http://127.0.0.1:{port_file.read_text()}"),
                "silent": recipe(work, "silent", f"http://127.0.0.1:{silent.getsockname()[1]}"),
                "refusing": recipe(work, "refusing", f"http://127.0.0.1:{closed.getsockname()[1]}"),
            }
            times: dict[str, list[float]] = {name: [] for name in cases}
            for run in range(args.runs):
                for name, path in cases.items():
                    times[name].append(once(work, path, run))
        finally:
            collector.terminate()
            collector.wait()
    base = min(times["plain"])
    for name, seconds in times.items():
        print(
            f"{name:10} min {min(seconds):.2f} s, median {statistics.median(seconds):.2f} s, "
            f"max {max(seconds):.2f} s over {len(seconds)} runs; min - plain's min {min(seconds) - base:+.2f} s"
        )


if __name__ == "__main__":
    main()
