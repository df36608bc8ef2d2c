"""What every scenario shares: the machine, results on disk, units and plans, jobs, /proc."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio

from srtd.launch import LocalLauncher
from srtd.supervisor import JobResult, NullConsole, Stop, supervise
from srtd.unit import Plan, Readiness, Restart, Unit, UnitKind

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "perf" / "results"
PROG = REPO / "perf" / "_prog.py"
TICK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- numbers


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank), in the values' unit."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary_ms(values: Sequence[float]) -> dict[str, float]:
    """p50 / p99 / max of seconds, in milliseconds."""
    return {
        "n": len(values),
        "p50_ms": round(pct(values, 50) * 1000, 1),
        "p99_ms": round(pct(values, 99) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1) if values else float("nan"),
        "mean_ms": round(statistics.fmean(values) * 1000, 1) if values else float("nan"),
    }


# ---------------------------------------------------------------- the machine and results


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "srtd"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "memory_mib": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "commit": commit + ("+dirty" if dirty else ""),
    }


def save(name: str, data: dict[str, Any], began: float, load_before: list[float]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {
        "scenario": name,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.monotonic() - began, 1),
        "load_before": load_before,
        "load_after": load_average(),
        "machine": machine(),
        **data,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


# ---------------------------------------------------------------- units and plans


def prog(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-S", str(PROG), *args)


def unit(
    name: str,
    argv: Sequence[str],
    *,
    readiness: Readiness | None = None,
    after: Iterable[Any] = (),
    **fields: Any,
) -> Unit:
    return Unit(
        name=name,
        kind=fields.pop("kind", UnitKind.SERVICE),
        phase="bench",
        nodes=("node0",),
        argv=tuple(argv),
        log=f"{name}.log",
        after=tuple(after),
        readiness=readiness,
        **fields,
    )


def plan(units: Sequence[Unit], log_dir: Path, *, hold: bool = False, name: str = "bench") -> Plan:
    return Plan(
        name=name,
        job_id="bench",
        local=True,
        log_dir=str(log_dir),
        nodes={"head": ("node0",)},
        allocation=("node0",),
        phases=("bench",),
        units=tuple(units),
        hold=hold,
    )


def no_restart() -> Restart:
    return Restart()


def marks(path: Path) -> list[tuple[str, float]]:
    """`(event, wall time)` lines of a marker file (missing: none)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append((parts[0], float(parts[-1])))
    return out


# ---------------------------------------------------------------- running jobs


def journal_events(log_dir: Path) -> list[dict[str, Any]]:
    path = log_dir / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def wait_for_state(log_dir: Path, state: str, unit: str | None = None, timeout: float = 120.0) -> float:
    """Until the journal has `state` (for `unit`, or the job): its timestamp."""
    with anyio.fail_after(timeout):
        while True:
            for e in journal_events(log_dir):
                if e.get("state") == state and e.get("unit") == unit:
                    return float(e["ts"])
            await anyio.sleep(0.05)


async def run_job(
    the_plan: Plan,
    *,
    while_running: Callable[[Stop], Coroutine[Any, Any, None]] | None = None,
    timeout: float = 180.0,
) -> JobResult:
    """Supervise in this process (latency scenarios); `while_running` may stop the job."""
    result: JobResult | None = None
    with anyio.fail_after(timeout):
        stop = Stop()
        async with anyio.create_task_group() as tg:
            if while_running is not None:
                tg.start_soon(while_running, stop)

            async def job() -> None:
                nonlocal result
                result = await supervise(the_plan, LocalLauncher(guardian_grace=1.0), console=NullConsole(), stop=stop)
                tg.cancel_scope.cancel()

            tg.start_soon(job)
    assert result is not None
    if result.state.value not in ("succeeded", "cancelled"):
        raise RuntimeError(f"benchmark job {the_plan.name} {result.state.value}: {result.reason}")
    return result


def run_held(the_plan: Plan, settle: float = 0.0) -> JobResult:
    """Run a held plan until every unit is up (`running`), wait `settle` s, stop it."""

    async def stop_when_running(stop: Stop) -> None:
        await wait_for_state(Path(the_plan.log_dir), "running")
        await anyio.sleep(settle)
        stop.request()

    return anyio.run(lambda: run_job(the_plan, while_running=stop_when_running))


def events_of(result: JobResult, unit: str | None, state: str) -> list[float]:
    return [e.ts for e in result.events if e.unit == unit and e.state == state]


# ---------------------------------------------------------------- processes: CPU and RSS


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (not its children), in clock ticks' resolution."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _schedstat_works() -> bool:
    """/proc/<pid>/schedstat's first field is a task's on-CPU time in ns; some kernels lack the
    file (no CONFIG_SCHED_INFO) and some print zeros.  This process has run, so > 0 if it works."""
    try:
        with open(f"/proc/{os.getpid()}/schedstat") as f:
            return int(f.read().split()[0]) > 0
    except (OSError, ValueError, IndexError):
        return False


# The clock CPU time is read from: nanoseconds per task, or else utime + stime (ticks of
# 1/TICK s, too coarse for an idle supervisor: 10 ms over a 20 s window is 0.05 %).
CPU_CLOCK = "schedstat" if _schedstat_works() else "stat"
CPU_CLOCK_NOTES = {
    "schedstat": "the on-CPU nanoseconds of every thread (first field of `/proc/<pid>/task/<tid>/schedstat`)",
    "stat": f"utime + stime from `/proc/<pid>/stat`, in ticks of {1000 // TICK} ms",
}

CpuSample = dict[tuple[int, int], int]


def cpu_sample(pids: Iterable[int]) -> CpuSample:
    """On-CPU ns so far, per (pid, thread) of each process (with the stat fallback: per process).

    Per thread because /proc/<pid>/schedstat counts the main thread only (circusd runs
    ZeroMQ's I/O threads beside it)."""
    out: CpuSample = {}
    for pid in pids:
        if CPU_CLOCK == "stat":
            with contextlib.suppress(OSError):
                out[(pid, pid)] = round(cpu_seconds(pid) * 1e9)
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[(pid, int(tid))] = int(f.read().split()[0])
    return out


def cpu_spent(before: CpuSample, after: CpuSample) -> tuple[int, int]:
    """ns used between two samples, and how many tasks of `before` were gone by `after`
    (their time after the first sample is lost: the count says whether that happened)."""
    spent = sum(ns - before.get(task, 0) for task, ns in after.items())
    return spent, sum(1 for task in before if task not in after)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def sig3(x: float) -> float:
    """`x` rounded to 3 significant digits (a share of a core, a ratio)."""
    if x == 0 or math.isnan(x) or math.isinf(x):
        return x
    return round(x, 2 - math.floor(math.log10(abs(x))))


def measure_cpu(pid: int, seconds: float) -> dict[str, float]:
    """CPU share of one core over `seconds` (3 significant digits), and the RSS at the end."""
    c0, t0 = cpu_sample([pid]), time.monotonic()
    time.sleep(seconds)
    c1, t1 = cpu_sample([pid]), time.monotonic()
    spent, _ = cpu_spent(c0, c1)
    return {"cpu_percent": sig3(100 * spent / 1e9 / (t1 - t0)), "rss_mib": round(rss_mib(pid), 1)}


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()
