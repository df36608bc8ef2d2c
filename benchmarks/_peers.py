"""Side by side with supervisord and circus, on what all three can express.

- start N processes: from launching the supervisor to the last process's first line;
- crash and restart: a process that exits 0.2 s after it starts, from its exit to
  its next start (srtd with `backoff_seconds: 0`, as the peers restart at once);
- CPU and RSS of the supervisor (with its helper processes: srtd's guardian) while
  N idle processes run.

Every process is a tiny shell script that appends `start <time>` / `exit <time>` to
its own marker file, so all three are timed by the same clock in the same way.
supervisord and circus come from PyPI (`nox -s bench` installs them); a peer that is
not installed is reported as missing, not skipped silently.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import (
    TICK,
    marks,
    plan,
    rss_mib,
    stop_process,
    summary_ms,
    unit,
    wait_until,
)
from srtd.unit import Restart, RestartMode

# `sleep 3600.<token>`: the idle process is found by its argv after the exec
IDLE_SH = 'echo start $(date +%s.%N) >> "$1"\nexec sleep "3600.$2"\n'
CRASH_SH = 'echo start $(date +%s.%N) >> "$1"\nsleep 0.2\necho exit $(date +%s.%N) >> "$1"\nexit 3\n'

Starter = Callable[[Path, list[tuple[str, str]], bool], subprocess.Popen[bytes]]


# ---------------------------------------------------------------- the three supervisors


def _token(root: Path) -> str:
    """Digits unique to this run (from the temporary directory's inode)."""
    return str(root.stat().st_ino)


def _ours(cmd: str, root: Path) -> bool:
    return str(root) in cmd or f"3600.{_token(root)}" in cmd


def _srtd(root: Path, programs: list[tuple[str, str]], crash: bool) -> subprocess.Popen[bytes]:
    restart = Restart(policy=RestartMode.ON_FAILURE, max_restarts=100000, backoff_seconds=0.0)
    units = [
        unit(name, ["sh", script, str(root / f"{name}.marks"), _token(root)], **({"restart": restart} if crash else {}))
        for name, script in programs
    ]
    path = root / "plan.json"
    path.write_text(plan(units, root / "logs", hold=True, name="peers").model_dump_json())
    return subprocess.Popen(
        [sys.executable, "-m", "srtd", "run", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _supervisord(root: Path, programs: list[tuple[str, str]], crash: bool) -> subprocess.Popen[bytes]:
    conf = [
        "[supervisord]",
        "nodaemon=true",
        f"logfile={root}/supervisord.log",
        f"pidfile={root}/supervisord.pid",
        f"childlogdir={root}",
        "loglevel=warn",
        "",
    ]
    for name, script in programs:
        conf += [
            f"[program:{name}]",
            f"command=sh {script} {root}/{name}.marks {_token(root)}",
            "autostart=true",
            "autorestart=true",
            "startsecs=0",
            "startretries=100000",
            "stopwaitsecs=5",
            f"stdout_logfile={root}/{name}.log",
            "redirect_stderr=true",
            "",
        ]
    path = root / "supervisord.conf"
    path.write_text("\n".join(conf))
    exe = shutil.which("supervisord", path=os.path.dirname(sys.executable)) or "supervisord"
    return subprocess.Popen([exe, "-c", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _circus(root: Path, programs: list[tuple[str, str]], crash: bool) -> subprocess.Popen[bytes]:
    conf = [
        "[circus]",
        f"endpoint = ipc://{root}/circus-endpoint",
        f"pubsub_endpoint = ipc://{root}/circus-pubsub",
        f"stats_endpoint = ipc://{root}/circus-stats",
        "statsd = False",
        "loglevel = WARNING",
        f"logoutput = {root}/circus.log",
        "",
    ]
    for name, script in programs:
        conf += [
            f"[watcher:{name}]",
            "cmd = sh",
            f"args = {script} {root}/{name}.marks {_token(root)}",
            "numprocesses = 1",
            "respawn = True",
            "max_retry = -1",
            "copy_env = True",
            "stdout_stream.class = FileStream",
            f"stdout_stream.filename = {root}/{name}.log",
            "",
        ]
    path = root / "circus.ini"
    path.write_text("\n".join(conf))
    exe = shutil.which("circusd", path=os.path.dirname(sys.executable)) or "circusd"
    return subprocess.Popen([exe, str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


PEERS: dict[str, tuple[Starter, str | None]] = {
    "srtd": (_srtd, None),
    "supervisord": (_supervisord, "supervisor"),
    "circus": (_circus, "circus"),
}


def _installed(module: str | None) -> bool:
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


# ---------------------------------------------------------------- processes


def _procs() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, cmdline) of every live process."""
    out: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                after = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if after[0] not in ("Z", "X"):
            out[int(entry)] = (int(after[1]), cmd)
    return out


def _own_processes(pid: int, root: Path) -> list[int]:
    """The supervisor and its helper processes (descendants not running our programs)."""
    procs = _procs()
    found, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, cmd) in procs.items():
            if ppid == parent and not _ours(cmd, root):
                found.append(child)
                frontier.append(child)
    return found


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def _kill_leftovers(root: Path) -> int:
    left = [pid for pid, (_, cmd) in _procs().items() if _ours(cmd, root) and pid != os.getpid()]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(left)


# ---------------------------------------------------------------- workloads


def _scripts(root: Path) -> tuple[str, str]:
    idle, crash = root / "idle.sh", root / "crash.sh"
    idle.write_text(IDLE_SH)
    crash.write_text(CRASH_SH)
    return str(idle), str(crash)


def idle_workload(peer: str, n: int, window: float) -> dict[str, Any]:
    start, _ = PEERS[peer]
    with tempfile.TemporaryDirectory(prefix=f"srtd-bench-{peer}-") as tmp:
        root = Path(tmp)
        idle, _ = _scripts(root)
        names = [f"p{i:04d}" for i in range(n)]
        began = time.time()
        proc = start(root, [(name, idle) for name in names], False)
        try:
            if not wait_until(lambda: all((root / f"{n_}.marks").exists() for n_ in names), 120, step=0.02):
                raise RuntimeError(f"{peer}: not every process started")
            last_start = max(t for n_ in names for e, t in marks(root / f"{n_}.marks") if e == "start")
            time.sleep(2.0)  # past the start-up burst
            own = _own_processes(proc.pid, root)
            c0, t0 = _cpu(own), time.monotonic()
            time.sleep(window)
            c1, t1 = _cpu(own), time.monotonic()
            rss = sum(rss_mib(pid) for pid in own if os.path.exists(f"/proc/{pid}"))
        finally:
            stop_process(proc)
            leftovers = _kill_leftovers(root)
    return {
        "start_all_s": round(last_start - began, 3),
        "idle_cpu_percent": round(100 * (c1 - c0) / (t1 - t0), 2),
        "rss_mib": round(rss, 1),
        "processes_measured": len(own),
        "leftovers_killed": leftovers,
    }


def crash_workload(peer: str, restarts: int, timeout: float) -> dict[str, Any]:
    start, _ = PEERS[peer]
    with tempfile.TemporaryDirectory(prefix=f"srtd-bench-{peer}-") as tmp:
        root = Path(tmp)
        _, crash = _scripts(root)
        proc = start(root, [("crash", crash)], True)
        marker = root / "crash.marks"
        try:
            wait_until(lambda: sum(1 for e, _ in marks(marker) if e == "start") > restarts, timeout, step=0.1)
        finally:
            stop_process(proc)
            _kill_leftovers(root)
        m = marks(marker)
    starts = [t for e, t in m if e == "start"]
    exits = [t for e, t in m if e == "exit"]
    latencies = [starts[i + 1] - exits[i] for i in range(min(len(exits), len(starts) - 1))]
    return {"exit_to_restart": summary_ms(latencies) if latencies else {"n": 0}}


def peers(quick: bool) -> dict[str, Any]:
    n = 100
    window = 3.0 if quick else 8.0
    restarts = 8 if quick else 15
    rows: dict[str, dict[str, Any]] = {}
    for peer, (_, module) in PEERS.items():
        if not _installed(module):
            rows[peer] = {"missing": f"{module} is not installed (nox -s bench installs it)"}
            continue
        rows[peer] = {**idle_workload(peer, n, window), **crash_workload(peer, restarts, timeout=25.0)}
    ratios: dict[str, dict[str, float]] = {}
    ours = rows["srtd"]
    for peer, row in rows.items():
        if peer == "srtd" or "missing" in row:
            continue
        ratios[peer] = {
            "start_all": _ratio(ours["start_all_s"], row["start_all_s"]),
            "crash_restart_p50": _ratio(ours["exit_to_restart"].get("p50_ms"), row["exit_to_restart"].get("p50_ms")),
            "idle_cpu": _ratio(ours["idle_cpu_percent"], row["idle_cpu_percent"]),
            "rss": _ratio(ours["rss_mib"], row["rss_mib"]),
        }
    present = list(ratios)
    met = {
        "srtd ahead on crash-and-restart latency": bool(present)
        and all(ratios[p]["crash_restart_p50"] < 1 for p in present),
        "srtd ahead on CPU while watching": bool(present)
        and all(ours["idle_cpu_percent"] <= rows[p]["idle_cpu_percent"] for p in present),
    }
    return {"title": "Side by side", "processes": n, "window_s": window, "rows": rows, "ratios": ratios, "met": met}


def _ratio(ours: float | None, theirs: float | None) -> float:
    if ours is None or theirs is None:
        return float("nan")
    if theirs == 0:
        return 0.0 if ours == 0 else float("inf")
    return round(ours / theirs, 3)
