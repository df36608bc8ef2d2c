"""Side by side with supervisord and circus, on what all three can express.

- start N processes: from launching the supervisor to the last process's first line (its
  configuration, srtd's plan.json, supervisord.conf or circus.ini, is written before);
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
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perf._common import (
    CPU_CLOCK,
    cpu_sample,
    cpu_spent,
    marks,
    plan,
    rss_mib,
    sig3,
    stop_process,
    summary_ms,
    unit,
    wait_until,
)
from srtd.unit import Restart, RestartMode
from tests.command import SRTD

# `sleep 3600.<token>`: the idle process is found by its argv after the exec
IDLE_SH = 'echo start $(date +%s.%N) >> "$1"\nexec sleep "3600.$2"\n'
CRASH_SH = 'echo start $(date +%s.%N) >> "$1"\nsleep 0.2\necho exit $(date +%s.%N) >> "$1"\nexit 3\n'

# writes the supervisor's configuration for these programs; returns the command that starts it
Configure = Callable[[Path, list[tuple[str, str]], bool], list[str]]


# ---------------------------------------------------------------- the three supervisors


def _token(root: Path) -> str:
    """Digits unique to this run (from the temporary directory's inode)."""
    return str(root.stat().st_ino)


def _ours(cmd: str, root: Path) -> bool:
    return str(root) in cmd or f"3600.{_token(root)}" in cmd


def _srtd_plan(root: Path, programs: list[tuple[str, str]], crash: bool) -> Path:
    """srtd's configuration: a saved plan of the programs."""
    restart = Restart(policy=RestartMode.ON_FAILURE, max_restarts=100000, backoff_seconds=0.0)
    fields: dict[str, Any] = {"restart": restart} if crash else {}
    units = [
        unit(name, ["sh", script, str(root / f"{name}.marks"), _token(root)], **fields) for name, script in programs
    ]
    path = root / "plan.json"
    path.write_text(plan(units, root / "logs", hold=True, name="peers").dumps())
    return path


def _srtd(root: Path, programs: list[tuple[str, str]], crash: bool) -> list[str]:
    # the `srtd` command, as the peers are started by theirs (`python -m srtd` where it is not installed)
    exe = shutil.which("srtd", path=os.path.dirname(sys.executable))
    return [*([exe] if exe else SRTD), "run", str(_srtd_plan(root, programs, crash))]


def _supervisord(root: Path, programs: list[tuple[str, str]], crash: bool) -> list[str]:
    conf = [
        "[supervisord]",
        "nodaemon=true",
        f"logfile={root}/supervisord.log",
        f"pidfile={root}/supervisord.pid",
        f"childlogdir={root}",
        "loglevel=warn",
        # 2 pipes (stdin, stdout) per process stay open in supervisord; it raises its soft
        # limits to these at start and refuses to run when the hard limits are lower
        f"minfds={max(1024, 4 * len(programs) + 256)}",
        f"minprocs={max(200, 2 * len(programs) + 100)}",
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
    return [exe, "-c", str(path)]


def _circus(root: Path, programs: list[tuple[str, str]], crash: bool) -> list[str]:
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
    return [exe, str(path)]


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _floor(root: Path, programs: list[tuple[str, str]], crash: bool) -> list[str]:
    """srtd's plan, started by perf/_floor.py: the launching alone (for the start only)."""
    return [sys.executable, str(Path(__file__).with_name("_floor.py")), str(_srtd_plan(root, programs, crash))]


FLOOR = "floor"  # not a peer: timed with the starts, on the same plans, in turn with the peers

PEERS: dict[str, tuple[Configure, str | None]] = {
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


# (root, token) of every run so far: the scenario's last check looks for any of their processes
_RUNS: list[tuple[str, str]] = []


def _kill_leftovers(root: Path) -> int:
    _RUNS.append((str(root), _token(root)))
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


@dataclass
class Started:
    """`n` idle processes under a peer, every one started (`_idle_started`)."""

    proc: subprocess.Popen[bytes]  # the supervisor
    root: Path  # its directory
    seconds: float  # from its launch to the last process's first line
    leftovers: int = 0  # once stopped: how many of the processes were left and killed


@contextlib.contextmanager
def _idle_started(peer: str, n: int) -> Iterator[Started]:
    """`n` idle processes under `peer`, every one started; then the peer stopped and what it
    left of them killed."""
    configure = _floor if peer == FLOOR else PEERS[peer][0]
    with tempfile.TemporaryDirectory(prefix=f"srtd-bench-{peer}-") as tmp:
        root = Path(tmp)
        idle, _ = _scripts(root)
        names = [f"p{i:04d}" for i in range(n)]
        argv = configure(root, [(name, idle) for name in names], False)
        began = time.time()  # the configuration is written: from the supervisor's launch
        proc = _start(argv)
        started = Started(proc, root, 0.0)
        try:
            if not wait_until(lambda: all((root / f"{n_}.marks").exists() for n_ in names), 300, step=0.05):
                raise RuntimeError(f"{peer}: not every one of {n} processes started")
            started.seconds = max(t for n_ in names for e, t in marks(root / f"{n_}.marks") if e == "start") - began
            yield started
        finally:
            stop_process(proc)
            started.leftovers = _kill_leftovers(root)


def idle_workload(peer: str, n: int, window: float, settle: float) -> dict[str, Any]:
    """`n` idle processes under `peer`: CPU and RSS of the supervisor and its helpers over
    `window` s, from `settle` s after the last one started (the start is timed by `start_runs`)."""
    with _idle_started(peer, n) as started:
        proc = started.proc
        time.sleep(settle)  # past the start-up burst
        own = _own_processes(proc.pid, started.root)
        c0, t0 = cpu_sample(own), time.monotonic()
        time.sleep(window)
        # helpers started during the window count from zero; none is expected
        own = sorted(set(own) | set(_own_processes(proc.pid, started.root)))
        c1, t1 = cpu_sample(own), time.monotonic()
        rss = sum(rss_mib(pid) for pid in own if os.path.exists(f"/proc/{pid}"))
        if proc.poll() is not None:
            raise RuntimeError(f"{peer} exited ({proc.returncode}) while watching {n} processes")
    spent, gone = cpu_spent(c0, c1)
    return {
        "window_s": round(t1 - t0, 3),
        "cpu_ms": round(spent / 1e6, 3),
        "cpu_percent": sig3(100 * spent / 1e9 / (t1 - t0)),
        "rss_mib": round(rss, 1),
        "processes_measured": len(own),
        "threads_measured": len(c1),
        "threads_gone": gone,
        "leftovers_killed": started.leftovers,
    }


def start_runs(peers: list[str], n: int, runs: int) -> dict[str, dict[str, Any]]:
    """Each peer started on `n` idle processes `runs` times, in turn (srtd, supervisord, circus,
    srtd, ...): the start's median, min and max.  One start is one sample of a noisy machine;
    taken in turn, a drift in the machine's speed falls on every peer alike."""
    times: dict[str, list[float]] = {peer: [] for peer in peers}
    for _ in range(runs):
        for peer in peers:
            with _idle_started(peer, n) as started:
                times[peer].append(round(started.seconds, 3))
    return {
        peer: {"median_s": round(statistics.median(t), 3), "min_s": min(t), "max_s": max(t), "runs": t}
        for peer, t in times.items()
    }


def crash_workload(peer: str, restarts: int, timeout: float) -> dict[str, Any]:
    configure, _ = PEERS[peer]
    with tempfile.TemporaryDirectory(prefix=f"srtd-bench-{peer}-") as tmp:
        root = Path(tmp)
        _, crash = _scripts(root)
        proc = _start(configure(root, [("crash", crash)], True))
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


def _raise_nofile() -> None:
    """The soft open-files limit up to the hard one (inherited by the supervisors: circusd
    keeps 2 pipes per process open and does not raise the limit itself)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))


# starts timed per size, each peer in turn (`start_runs`): the medians are compared
START_RUNS = {False: {100: 7, 1000: 3}, True: {100: 3, 1000: 1}}


def peers(quick: bool) -> dict[str, Any]:
    sizes = (100, 1000)
    window = 5.0 if quick else 20.0
    settle = 3.0
    restarts = 8 if quick else 15
    _raise_nofile()
    rows: dict[str, dict[str, Any]] = {}
    for peer, (_, module) in PEERS.items():
        if not _installed(module):
            rows[peer] = {"missing": f"{module} is not installed (nox -s bench installs it)"}
            continue
        idle = {str(n): idle_workload(peer, n, window, settle) for n in sizes}
        rows[peer] = {"idle": idle, **crash_workload(peer, restarts, timeout=25.0)}
        print(f"[bench]   {peer}: " + ", ".join(f"{n}: {v['cpu_percent']} %" for n, v in idle.items()), file=sys.stderr)
    running = [peer for peer, row in rows.items() if "missing" not in row]
    floor: dict[str, Any] = {}
    for size in sizes:
        for peer, start in start_runs([*running, FLOOR], size, START_RUNS[quick][size]).items():
            if peer == FLOOR:
                floor[str(size)] = start
            else:
                rows[peer].setdefault("start", {})[str(size)] = start
    time.sleep(1.0)  # SIGKILLed leftovers of the last run are gone from /proc by now
    left = [
        pid
        for pid, (_, cmd) in _procs().items()
        if pid != os.getpid() and any(r in cmd or f"3600.{t}" in cmd for r, t in _RUNS)
    ]
    ours = rows["srtd"]
    present = [p for p, row in rows.items() if p != "srtd" and "missing" not in row]
    ratios: dict[str, dict[str, float]] = {}
    for peer in present:
        row = rows[peer]
        ratios[peer] = {
            "crash_restart_p50": _ratio(ours["exit_to_restart"].get("p50_ms"), row["exit_to_restart"].get("p50_ms")),
        }
        for n in map(str, sizes):
            ratios[peer][f"start_all@{n}"] = _ratio(ours["start"][n]["median_s"], row["start"][n]["median_s"])
            ratios[peer][f"idle_cpu@{n}"] = _ratio(ours["idle"][n]["cpu_percent"], row["idle"][n]["cpu_percent"])
            ratios[peer][f"rss@{n}"] = _ratio(ours["idle"][n]["rss_mib"], row["idle"][n]["rss_mib"])
    met = targets_met(rows, ratios, sizes)
    return {
        "title": "Side by side",
        "sizes": list(sizes),
        "window_s": window,
        "settle_s": settle,
        "start_runs": START_RUNS[quick],
        "floor_start": floor,  # perf/_floor.py: the launching alone
        "cpu_clock": CPU_CLOCK,
        "rows": rows,
        "ratios": ratios,
        "met": met,
        "left_running": left,  # pids of ours still alive after every run was stopped: none expected
    }


def targets_met(rows: dict[str, dict[str, Any]], ratios: dict[str, dict[str, float]], sizes: Any) -> dict[str, bool]:
    """The side-by-side targets (issue #36 among them), each met or not in this run."""
    ours = rows["srtd"]
    present = [p for p, row in rows.items() if p != "srtd" and "missing" not in row]
    sizes = [str(n) for n in sizes]
    met = {
        "srtd ahead on crash-and-restart latency": bool(present)
        and all(ratios[p]["crash_restart_p50"] < 1 for p in present),
        # strict: a tie (say 0 and 0 with a coarse clock) is not a lead
        "srtd ahead on CPU while watching (every size, every peer)": bool(present)
        and all(ours["idle"][n]["cpu_ms"] < rows[p]["idle"][n]["cpu_ms"] for p in present for n in sizes),
    }
    if "circus" in ratios:
        for n in sizes:
            met[f"srtd starts {n} processes in at most 0.6 x circus's time"] = ratios["circus"][f"start_all@{n}"] <= 0.6
        met["srtd's RSS at or below circus's (every size)"] = all(ratios["circus"][f"rss@{n}"] <= 1 for n in sizes)
    if "supervisord" in ratios:
        met["srtd's RSS within 1.2 x supervisord's (every size)"] = all(
            ratios["supervisord"][f"rss@{n}"] <= 1.2 for n in sizes
        )
    return met


def _ratio(ours: float | None, theirs: float | None) -> float:
    if ours is None or theirs is None:
        return float("nan")
    if theirs == 0:
        return 0.0 if ours == 0 else float("inf")
    return sig3(ours / theirs)
