"""srtd's aiperf driver: ``srtd-aiperf --url URL --model NAME --tokenizer DIR --concurrency N [...]``.

The `aiperf` benchmark type runs this program as its unit.  It runs NVIDIA aiperf
once per concurrency level, one after the other, each into its own artifact
directory (`<artifacts>/c<N>/`, aiperf's console output in `aiperf.out` there),
then prints one table (per concurrency: requests, errors, TTFT p50/p99, ITL,
output tokens per second) and writes the same as JSON.

Requests and errors are counted from aiperf's per-request export
(`profile_export.jsonl`), which aiperf writes even when every request failed (its
summary JSON is then missing).  Any failed request, a short count, or a non-zero
aiperf exit makes the program exit 1, so the job fails.

With power telemetry (`SRT_MEASUREMENT_WINDOW_DIR` set, docs/services.md) each level is a
measurement window: `<dir>/aiperf_c<N>.json`, marked `running` as its aiperf run starts and
`completed` (or `failed`) when it ends, in srt-slurm's window format, so srtd can tell the
power each level drew.

Under observability's Nsight Systems capture (`SRT_NSYS_CONTROL_SCRIPT` and
`SRT_NSYS_CONTROL_DIR` set, docs/engines.md) each level is its own window: opened
before its aiperf run, closed after it, so each concurrency gets its own report; a
window that does not open or close fails the run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from srtd._files import open_file, write_target
from srtd._value import value_class
from srtd.errors import FileRefused

#: aiperf 0.13.0 cannot load a local tokenizer directory with these set (it goes to the
#: hub's cache lookup and rejects the path as a repo id); a local path needs no hub anyway.
_HUB_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_TAIL_LINES = 20


@value_class
class Settings:
    """The command line, once parsed: what every aiperf run shares."""

    url: str
    model: str
    tokenizer: str
    aiperf: tuple[str, ...]
    isl: int
    osl: int
    requests: int
    request_rate: str | None
    artifacts: Path


@value_class
class Level:
    """The outcome of one aiperf run (one concurrency level)."""

    concurrency: int
    requests: int
    errors: int
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_avg_ms: float | None
    output_tokens_per_s: float | None
    exit_code: int
    first_error: str | None = None

    def failure(self, expected: int) -> str | None:
        if self.errors:
            return f"{self.errors}/{self.requests} requests failed; first error: {self.first_error}"
        if self.exit_code != 0:
            return f"aiperf exited with {self.exit_code}"
        if self.requests != expected:
            return f"{self.requests} of {expected} requests recorded"
        return None


def aiperf_argv(s: Settings, concurrency: int, out: Path) -> list[str]:
    argv = [*s.aiperf, "profile", "--model", s.model, "--url", s.url, "--endpoint-type", "chat", "--streaming"]
    argv += ["--tokenizer", s.tokenizer, "--isl", str(s.isl), "--osl", str(s.osl)]
    argv += ["--concurrency", str(concurrency), "--request-count", str(s.requests)]
    if s.request_rate is not None:
        argv += ["--request-rate", s.request_rate]
    # The mocker's random output ids re-tokenize differently: trust the server's counts.
    argv += ["--use-server-token-count", "--random-seed", "1", "--ui", "none", "--no-server-metrics"]
    return [*argv, "--artifact-dir", str(out)]


def aiperf_env(tokenizer: str) -> dict[str, str]:
    env = dict(os.environ)
    if Path(tokenizer).is_dir():
        for var in _HUB_OFFLINE_VARS:
            env.pop(var, None)
    return env


def read_level(out: Path, concurrency: int, exit_code: int) -> Level:
    """Counts from the per-request export, latencies from aiperf's summary when it wrote one."""
    requests = errors = 0
    first_error = None
    records = out / "profile_export.jsonl"
    if records.exists():
        for line in records.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if record.get("metadata", {}).get("benchmark_phase", "profiling") != "profiling":
                continue
            requests += 1
            if record.get("error"):
                errors += 1
                if first_error is None:
                    first_error = json.dumps(record["error"], sort_keys=True)
    summary: dict[str, Any] = {}
    summary_file = out / "profile_export_aiperf.json"
    if summary_file.exists():
        summary = json.loads(summary_file.read_text())
    return Level(
        concurrency=concurrency,
        requests=requests,
        errors=errors,
        ttft_p50_ms=_stat(summary, "time_to_first_token", "p50"),
        ttft_p99_ms=_stat(summary, "time_to_first_token", "p99"),
        itl_avg_ms=_stat(summary, "inter_token_latency", "avg"),
        output_tokens_per_s=_stat(summary, "output_token_throughput", "avg"),
        exit_code=exit_code,
        first_error=first_error,
    )


def _stat(summary: dict[str, Any], metric: str, key: str) -> float | None:
    value = summary.get(metric, {}).get(key)
    return round(float(value), 3) if isinstance(value, int | float) else None


def run_level(s: Settings, concurrency: int) -> Level:
    out = s.artifacts / f"c{concurrency}"
    out.mkdir(parents=True, exist_ok=True)
    argv = aiperf_argv(s, concurrency, out)
    say(f"concurrency {concurrency}: {shlex.join(argv)}")
    console = out / "aiperf.out"
    try:
        with open(open_file(console, error=FileRefused), "w") as sink:
            done = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, env=aiperf_env(s.tokenizer), check=False)
        code = done.returncode
    except OSError as exc:
        say(f"cannot run {s.aiperf[0]}: {exc}")
        code = 127
    level = read_level(out, concurrency, code)
    if level.failure(s.requests) is not None and console.exists():
        tail = console.read_text(errors="replace").splitlines()[-_TAIL_LINES:]
        say(f"the last lines of {console}:")
        for line in tail:
            say(f"  {line}")
    return level


def table(levels: list[Level]) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    view = Table(title="aiperf")
    for column in ("concurrency", "requests", "errors", "TTFT p50 ms", "TTFT p99 ms", "ITL avg ms", "output tok/s"):
        view.add_column(column, justify="right")
    for lv in levels:
        cells = (lv.ttft_p50_ms, lv.ttft_p99_ms, lv.itl_avg_ms, lv.output_tokens_per_s)
        view.add_row(
            str(lv.concurrency), str(lv.requests), str(lv.errors), *("-" if c is None else f"{c:.1f}" for c in cells)
        )
    buffer = StringIO()
    Console(file=buffer, width=100, color_system=None).print(view)
    return buffer.getvalue()


def say(message: str) -> None:
    print(f"srtd-aiperf: {message}", flush=True)


def write_output(s: Settings, levels: list[Level], failures: list[str], output: Path) -> None:
    """The summary so far, replaced atomically: srtd journals each level as it appears."""
    result = {
        "model": s.model,
        "url": s.url,
        "isl": s.isl,
        "osl": s.osl,
        "requests_per_level": s.requests,
        "request_rate": s.request_rate,
        "levels": [asdict(lv) for lv in levels],
        "requests": sum(lv.requests for lv in levels),
        "errors": sum(lv.errors for lv in levels),
        "failures": failures,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    write_target(output, json.dumps(result, indent=2) + "\n", error=FileRefused)  # a link there: refused


def window(action: str) -> str | None:
    """Open or close the job's Nsight Systems window, if it has one: why it failed, or None."""
    script, control = os.environ.get("SRT_NSYS_CONTROL_SCRIPT"), os.environ.get("SRT_NSYS_CONTROL_DIR")
    if not script or not control:
        return None
    done = subprocess.run([sys.executable, script, action], check=False)  # the hook prints its own reason
    return None if done.returncode == 0 else f"the Nsight Systems window did not {action} (exit {done.returncode})"


WINDOW_DIR_ENV = "SRT_MEASUREMENT_WINDOW_DIR"


def mark_window(concurrency: int, start: float, end: float | None = None, why: str | None = None) -> None:
    """Write one level's measurement window (running, then completed or failed), if the job measures power."""
    folder = os.environ.get(WINDOW_DIR_ENV)
    if not folder:
        return
    status = "running" if end is None else "failed" if why else "completed"
    doc = {
        "schema_version": 1,
        "clock_source": "head_node_unix_clock",
        "benchmark_type": "aiperf",
        "concurrency": concurrency,
        "status": status,
        "benchmark_start_time_unix": start,
        "benchmark_end_time_unix": end,
        "duration": None if end is None else round(end - start, 6),
        "reason": why,
        "result_path": None,
    }
    path = Path(folder) / f"aiperf_c{concurrency}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_target(path, json.dumps(doc, indent=2) + "\n", error=FileRefused)
    except OSError as e:  # the benchmark goes on; the power check will say the window is missing
        say(f"cannot mark the measurement window in {folder}: {e}")


def run(s: Settings, concurrencies: list[int], output: Path | None) -> int:
    levels: list[Level] = []
    windows: list[str] = []  # a window that failed: the capture is incomplete, so is the run
    for concurrency in concurrencies:
        if why := window("start"):
            windows.append(f"concurrency {concurrency}: {why}")
            break
        start = time.time()
        mark_window(concurrency, start)
        levels.append(run_level(s, concurrency))
        mark_window(concurrency, start, time.time(), levels[-1].failure(s.requests))
        if why := window("stop"):
            windows.append(f"concurrency {concurrency}: {why}")
            break
        if output is not None:
            write_output(s, levels, [], output)
    failures = [f"concurrency {lv.concurrency}: {why}" for lv in levels if (why := lv.failure(s.requests))]
    failures += windows
    print(table(levels), end="", flush=True)
    if output is not None:
        write_output(s, levels, failures, output)
        say(f"results written to {output}")
    for failure in failures:
        say(f"FAILED: {failure}")
    return 1 if failures else 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--aiperf", "aiperf", default="aiperf", show_default=True, help="aiperf command (split like a shell).")
@click.option("--url", required=True, help="Frontend base URL, e.g. http://127.0.0.1:8000.")
@click.option("--model", required=True, help="Served model name.")
@click.option("--tokenizer", required=True, help="Tokenizer: the model directory.")
@click.option("--isl", type=click.IntRange(min=1), default=64, show_default=True, help="Input tokens per request.")
@click.option("--osl", type=click.IntRange(min=1), default=32, show_default=True, help="Output tokens per request.")
@click.option(
    "--concurrency",
    "concurrencies",
    type=click.IntRange(min=1),
    multiple=True,
    required=True,
    help="A concurrency level; repeat for several (one aiperf run each).",
)
@click.option(
    "--requests", type=click.IntRange(min=1), default=20, show_default=True, help="Requests per concurrency level."
)
@click.option("--request-rate", default=None, help="Requests per second (default: as fast as concurrency allows).")
@click.option(
    "--artifacts", type=click.Path(file_okay=False, path_type=Path), required=True, help="aiperf's export root."
)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Summary JSON file.")
def main(aiperf: str, concurrencies: tuple[int, ...], output: Path | None, **settings: Any) -> None:
    """Run aiperf once per concurrency level; exit 1 if any request fails."""
    # The other options are named as Settings' fields: click hands them over as they are.
    sys.exit(run(Settings(aiperf=tuple(shlex.split(aiperf)), **settings), list(concurrencies), output))


if __name__ == "__main__":
    main()
