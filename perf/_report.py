"""docs/performance.md from perf/results/*.json (and two plots, when matplotlib is there)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perf import _slurm_report
from perf._cli import section as cli_section
from perf._common import CPU_CLOCK_NOTES, REPO, RESULTS
from perf.node_loss import section as node_loss_section
from perf.node_replace import section as node_replace_section

PAGE = REPO / "docs" / "performance.md"
IMAGES = REPO / "docs" / "img"
ORDER = (
    "exits",
    "readiness",
    "makespan",
    "teardown",
    "watching",
    "plan",
    "peers",
    "cli",
    "collector",
    "attach-relay",
    "node_loss",
    "node_replace",
    *_slurm_report.NAMES,
)


def _load() -> dict[str, dict[str, Any]]:
    out = {}
    for name in ORDER:
        path = RESULTS / f"{name}.json"
        if path.exists():
            out[name] = json.loads(path.read_text())
    return out


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _ms(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:g}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _load_note(r: dict[str, Any]) -> str:
    return f"load average {r['load_before'][0]:.1f} before, {r['load_after'][0]:.1f} after; {r['seconds']:g} s"


def _head(title: str, r: dict[str, Any], *prose: str) -> list[str]:
    """A section's title, its load note and what it measures."""
    return [f"## {title}", "", f"_{_load_note(r)}_", "", "".join(prose), ""]


def _met(r: dict[str, Any]) -> list[str]:
    return [*(f"- {k}: {_yes(v)}" for k, v in r["met"].items()), ""]


# ---------------------------------------------------------------- sections


def _exits(r: dict[str, Any]) -> list[str]:
    out = _head(
        "Exit → decision",
        r,
        f"{r['crashes']} crashes of three units that exit 50 ms after they start, restarted with"
        " `backoff_seconds: 0`. Times run from the process's own last timestamp before `exit()`.",
    )
    rows = []
    for key, label in (
        ("exit_to_decision", "exit → journal `exited`"),
        ("exit_to_relaunch", "exit → journal `starting` (relaunched)"),
        ("exit_to_running", "exit → the new process runs its first line"),
    ):
        s = r[key]
        rows.append([label, s["n"], _ms(s["p50_ms"]), _ms(s["p99_ms"]), _ms(s["max_ms"])])
    out += _table(["measure", "n", "p50 ms", "p99 ms", "max ms"], rows)
    out += [f"Target: p99 of exit → decision ≤ {r['target_p99_ms']} ms: {_yes(r['met'])}.", ""]
    return out


CASES = {
    "tcp": "tcp, announces `listening on port N`",
    "tcp-silent": "tcp, writes nothing",
    "http": "http (interval 10 s), announces `Uvicorn running on ...`",
    "http-silent": "http (interval 10 s), writes nothing",
    "log": "log probe",
    "gate": "worker-count gate (toy router, interval 10 s)",
}


def _readiness(r: dict[str, Any]) -> list[str]:
    out = _head(
        "Readiness latency",
        r,
        "From the moment a unit is ready (its own timestamp right after `listen()`, after the HTTP"
        " server is up, or after printing its line; for the gate: the first time the router's"
        " `/workers` counts both workers, polled every 20 ms from outside) to srtd's `ready` event."
        " Default settings: `interval_seconds` 2 s for tcp (services), 10 s for http and the gate"
        " (engines and frontends). The gates run in jobs of their own (the outside poll and the"
        " routers would load the CPU the other cases are timed on).",
    )
    rows = []
    for case, label in CASES.items():
        by_t = r["latency"].get(case, {})
        cells = []
        for t in ("0.5", "10.0"):
            s = by_t.get(t)
            cells.append(f"{_ms(s['p50_ms'])} / {_ms(s['max_ms'])} (n={s['n']})" if s else "-")
        rows.append([label, *cells])
    out += _table(["probe", "ready at 0.5 s: p50 / max ms", "ready at 10 s: p50 / max ms"], rows)
    out += _met(r)
    out += [
        "A server that writes nothing when it starts listening is found by the clock alone: within"
        " the quick pace (≤ 250 ms) during its first interval, then within 1 s (a refused connect"
        ' is cheap), or within `interval_seconds` once an HTTP server answers "not ready". A'
        " negative gate latency means srtd saw both workers before the 20 ms outside poll did.",
        "",
    ]
    return out


def _makespan(r: dict[str, Any]) -> list[str]:
    out = _head(
        "Makespan of random DAGs",
        r,
        "100 units, each `sh -c 'sleep D; echo ready; ...'` with D uniform in [0.1, 0.8] s and a"
        " log probe, 0-3 random `ready` edges to earlier units (seeded). Makespan: job `starting`"
        " to the last `ready`; the critical path is the longest chain of D.",
    )
    rows = [
        [x["seed"], x["depth"], x["critical_path_s"], x["makespan_s"], x["ratio"],
         f"{x['ready_to_launch']['p50_ms']} / {x['ready_to_launch']['p99_ms']}",
         f"{x['launch_to_ready_minus_delay']['p50_ms']} / {x['launch_to_ready_minus_delay']['p99_ms']}"]
        for x in r["runs"]
    ]  # fmt: skip
    out += _table(
        ["seed", "depth", "critical path s", "makespan s", "ratio",
         "parents ready → launch p50/p99 ms", "launch → ready - D p50/p99 ms"],
        rows,
    )  # fmt: skip
    out += [f"Target: ratio ≤ {r['target_ratio']}: {_yes(r['met'])}.", ""]
    return out


def _teardown(r: dict[str, Any]) -> list[str]:
    out = _head(
        "Teardown by tier",
        r,
        "100 units over tiers 0, 1, 2; each traps SIGTERM and exits after a known delay (0.1-1 s).",
    )
    out += _table(
        ["Σ over tiers of the slowest unit", "teardown (job `stopping` → last `stopped`)", "overhead"],
        [[f"{r['sum_of_tier_maxima_s']} s", f"{r['teardown_s']} s", f"{r['overhead_s']} s"]],
    )
    out += [f"Target: overhead ≤ {r['target_overhead_s']} s: {_yes(r['met'])}.", ""]
    return out


def _watching(r: dict[str, Any]) -> list[str]:
    out = _head(
        "Cost of watching",
        r,
        "`srtd run` as its own process with N units of `sleep 3600`, each with a fatal pattern."
        f" CPU (share of one core) and RSS of the srtd process over {r['window_s']:g} s once every"
        f" unit runs (CPU: {CPU_CLOCK_NOTES.get(r.get('cpu_clock', 'stat'), '?')}); `chatty`: an"
        " outside writer appends a line to every unit's log 10 times a"
        " second. Then a fatal line is appended to one log: the time until the job is `stopping`."
        " `auto` is inotify; `poll` is the fallback for shared file systems (`SRTD_LOG_WATCH=poll`)."
        " A CPU % of 0 means none of srtd's threads ran during the window.",
    )
    rows = [
        [c["units"], c["watch"], "chatty" if c["chatty"] else "idle", c["launch_to_running_s"], _sig(c["cpu_percent"]),
         c["rss_mib"], c["lines_per_s"] or "-", c["fatal_line_ms"]]
        for c in r["cases"]
    ]  # fmt: skip
    out += _table(
        ["units", "watcher", "logs", "launch → running s", "CPU %", "RSS MiB", "lines/s", "fatal line → stopping ms"],
        rows,
    )
    out += _met(r)
    if (IMAGES / "perf-watching.png").exists():
        out += ["![CPU while watching](img/perf-watching.png)", ""]
    return out


def _plan(r: dict[str, Any]) -> list[str]:
    out = _head(
        "`srtd plan` as a whole process",
        r,
        "`python -m srtd plan RECIPE --json --slurm` as a fresh process (interpreter, imports, load, plan,"
        " JSON), with bytecode cached as an installed srtd has it. Wall time suffers most from the"
        " load of the shared machine; the CPU time of the process is the steadier number.",
    )
    rows = [
        [x["recipe"], x["units"], x["min_ms"], x["median_ms"], x["max_ms"], x.get("cpu_median_ms", "-"),
         x["target_ms"], _yes(x["median_ms"] <= x["target_ms"])]
        for x in r["rows"]
    ]  # fmt: skip
    out += _table(
        ["recipe", "units", "min ms", "median ms", "max ms", "CPU median ms", "target ms", "met (median)"], rows
    )
    if not r.get("corpus"):
        out += ["The upstream corpus was not found (set `SRTD_BENCH_CORPUS`): only the generated recipe ran.", ""]
    return out


def _sig(v: Any) -> str:
    """A share of a core to 3 significant digits, never in exponent notation."""
    if not isinstance(v, (int, float)) or math.isnan(v):
        return _ms(v)
    if v == 0 or math.isinf(v):
        return f"{v:g}"
    return f"{v:.{max(0, 2 - math.floor(math.log10(abs(v))))}f}"


def _floor_line(r: dict[str, Any], sizes: list[str]) -> list[str]:
    """The launching alone (perf/_floor.py), against circus, in the same runs."""
    floor, circus = r.get("floor_start"), r["rows"].get("circus", {}).get("start")
    if not floor or not circus:
        return []
    said = ", ".join(
        f"{n} in {_ms(floor[n]['median_s'])} s ({_sig(floor[n]['median_s'] / circus[n]['median_s'])} x circus)"
        for n in sizes
        if n in floor and n in circus
    )
    return [
        "The floor of srtd's design, `perf/_floor.py` (an anyio program that reads the same plan and"
        " only launches each process as srtd's local launcher does, with no graph, journal, console,"
        f" checks or guardian), started {said}, medians taken in turn with the peers. What srtd"
        " adds above it is its own cost.",
        "",
    ]


def _start_runs(r: dict[str, Any]) -> str:
    runs = r.get("start_runs")
    if not runs:
        return "1 start"
    return " and ".join(f"{k} starts with {n}" for n, k in runs.items())


def _peers(r: dict[str, Any]) -> list[str]:
    sizes = [str(n) for n in r["sizes"]]
    clock = CPU_CLOCK_NOTES.get(r.get("cpu_clock", "stat"), r.get("cpu_clock", "?"))
    out = _head(
        "Side by side: supervisord and circus",
        r,
        f"The same {' and the same '.join(sizes)} idle processes (`sleep`) under each supervisor"
        " (installed from PyPI in the bench session), one supervisor at a time, each started by its"
        " command (`srtd run plan.json`, `supervisord -c`, `circusd`). Start: from launching"
        " the supervisor (its configuration written) to the last process's first line (srtd's time"
        " includes importing itself, as the peers' does), the median of"
        f" {_start_runs(r)}, the peers taken in turn so that a drift in the machine's speed falls on"
        " all alike; the fastest and slowest start are in brackets. Crash and restart: one process"
        " that exits 0.2 s after it starts, from"
        " its exit to its next start (srtd with `backoff_seconds: 0`; supervisord with `startsecs=0`,"
        " `autorestart=true`; circus with `respawn`). CPU while watching: the supervisor and its"
        " helper processes (every descendant that is not one of the programs: srtd's guardian), all"
        " their threads (circusd's ZeroMQ threads too), from"
        f" {r['settle_s']:g} s after the last process started, over {r['window_s']:g} s; the clock is"
        f" {clock}. The CPU time in the window (ms) and its share of one core (3 significant digits)"
        " are given; RSS is summed over the same processes at the end of the window. supervisord is"
        " given `minfds` / `minprocs` for 1000 processes and every supervisor inherits the hard"
        " open-files limit as its soft one.",
    )
    peers = list(r["rows"])

    def cells(get: Callable[[dict[str, Any]], str]) -> list[str]:
        return [get(r["rows"][p]) if "missing" not in r["rows"][p] else "missing" for p in peers]

    def idle(key: str, n: str, fmt: Callable[[Any], str] = _ms) -> list[str]:
        return cells(lambda row: fmt(row["idle"][n][key]))

    def crash(key: str) -> list[str]:
        return cells(lambda row: _ms(row.get("exit_to_restart", {}).get(key)))

    def start(n: str) -> list[str]:
        def cell(row: dict[str, Any]) -> str:
            s = row["start"][n]
            return f"{_ms(s['median_s'])} ({_ms(s['min_s'])} to {_ms(s['max_s'])})"

        return cells(cell)

    rows = [
        *([f"start {n} processes (s)", *start(n)] for n in sizes),
        ["crash → restart p50 (ms)", *crash("p50_ms")],
        ["crash → restart max (ms)", *crash("max_ms")],
        *([f"**CPU while watching {n}** (% of a core)", *idle("cpu_percent", n, _sig)] for n in sizes),
        *([f"CPU time in the {r['window_s']:g} s window, {n} (ms)", *idle("cpu_ms", n)] for n in sizes),
        *([f"RSS with {n} (MiB)", *idle("rss_mib", n)] for n in sizes),
        [
            f"processes / threads measured ({sizes[-1]})",
            *cells(
                lambda row: (
                    f"{row['idle'][sizes[-1]]['processes_measured']} / {row['idle'][sizes[-1]]['threads_measured']}"
                )
            ),
        ],
    ]
    out += _table(["measure", *peers], rows)
    out += _floor_line(r, sizes)
    keys = ["crash_restart_p50", *(f"{m}@{n}" for m in ("start_all", "idle_cpu", "rss") for n in sizes)]
    labels = ["crash → restart p50", *(f"{m} {n}" for m in ("start", "CPU", "RSS") for n in sizes)]
    ratio_rows = [[p, *(_sig(v.get(k)) for k in keys)] for p, v in r["ratios"].items()]
    out += ["srtd / peer (below 1: srtd is faster, cheaper or smaller):", ""]
    out += _table(["peer", *labels], ratio_rows)
    by_peer = {p: row["idle"] for p, row in r["rows"].items() if "idle" in row}
    gone = [f"{p} at {n}" for p, by_n in by_peer.items() for n in sizes if by_n[n]["threads_gone"]]
    if gone:
        out += [f"Threads that ended during the window (their last CPU time is not counted): {', '.join(gone)}.", ""]
    missing = [f"- {p}: {row['missing']}" for p, row in r["rows"].items() if "missing" in row]
    left = r.get("left_running", [])
    out += [*missing, *[f"- {k}: {_yes(v)}" for k, v in r["met"].items()]]
    out += [f"- processes left running after the scenario (checked in /proc): {len(left) or 'none'}", ""]
    out += [
        "The CPU verdict is strict: srtd's CPU time must be below each peer's at every size (a tie is"
        " not a lead). What each does while its processes idle: srtd waits in `epoll_wait` with no"
        " timeout on a pidfd per process (and a few descriptors of its own), so nothing wakes it"
        " until something happens (strace of an idle srtd shows one wake-up ~10 s after the start:"
        " the plain console's progress timer, which ends once the job is running); supervisord"
        " wakes every second (`poll` with a 1 s timeout), re-registers every pipe and walks every"
        " process; circusd's arbiter checks every watcher every second (`check_delay`). So the"
        " peers' cost grows with the number of processes and srtd's does not.",
        "",
    ]
    if (IMAGES / "perf-peers.png").exists():
        out += ["![Crash and restart latency](img/perf-peers.png)", ""]
    return out


def _collector(r: dict[str, Any]) -> list[str]:
    out = _head(
        "Collector under a PUT storm",
        r,
        f"`srtd collector` (write token, SQLite WAL with synchronous=NORMAL on {r['filesystem']}) takes PUTs"
        f" from {r['jobs']} jobs reporting at once, one kept-alive connection and one request in flight per job"
        " (as srtd's reporter sends); each PUT timed at the client, from sending to the whole answer. The"
        " storm offers 1000 PUTs in 2.5 s; the flat-out run sends each job's next PUT as soon as the last is"
        " answered, which shows the ceiling (its latency is the queue of 20 requests in flight).",
    )
    rows = [
        [
            f"{x['offered_per_s']:g}/s" if x["offered_per_s"] else "flat out",
            x["requests"],
            x["wall_s"],
            x["requests_per_s"],
            x["p50_ms"],
            x["p90_ms"],
            x["p99_ms"],
            x["max_ms"],
        ]
        for x in r["rows"]
    ]
    out += _table(["offered", "PUTs", "wall s", "PUTs/s", "p50 ms", "p90 ms", "p99 ms", "max ms"], rows)
    out += [f"Target: p99 < {r['target_p99_ms']:g} ms in the storm, every PUT recorded: {_yes(r['met'])}.", ""]
    return out


def _attach_relay(r: dict[str, Any]) -> list[str]:
    title = "Attach from the login node: the relay step vs the job's node (dev Slurm cluster)"
    if "skipped" in r:
        return [f"## {title}", "", f"Not measured: {r['skipped']}.", ""]
    out = _head(
        title,
        r,
        "One round trip is a client's first move to the first snapshot in its hands. On the node: connect to"
        " the socket, greeting, `snapshot`. Relay: the same through `connect(<job id>)` from a process whose"
        " runtime directory is its own: `squeue` for the batch host, `srun --jobid ... srtd relay` (a Slurm"
        " step with a Python interpreter), then the protocol through it; the next sample starts once the"
        " step has ended. CLI: `srtd attach JOB --once --json` end to end, interpreter start included.",
    )
    rows = [
        [what, x["n"], x["p50_ms"], x["p99_ms"], x["max_ms"]]
        for what, x in (
            ("on the node (library)", r["node"]),
            ("relay (library)", r["relay"]),
            ("on the node (CLI)", r["cli_node"]),
            ("relay (CLI)", r["cli_relay"]),
        )
    ]
    return out + _table(["round trip", "n", "p50 ms", "p99 ms", "max ms"], rows)


SECTIONS = {
    "exits": _exits,
    "readiness": _readiness,
    "makespan": _makespan,
    "teardown": _teardown,
    "watching": _watching,
    "plan": _plan,
    "peers": _peers,
    "cli": cli_section,
    "collector": _collector,
    "attach-relay": _attach_relay,
    "node_loss": node_loss_section,
    "node_replace": node_replace_section,
    **_slurm_report.SECTIONS,
}


# ---------------------------------------------------------------- shortfalls and plots


# What the measurements so far point at when a target is missed (see the sections).
WHY = {
    "exits": "the p99 of about 100 exits is nearly the worst one; on a machine with a load far"
    " above its 2 cores the srtd process itself waits tens of ms to be scheduled",
    "makespan": "process creation: each launch blocks the event loop in fork/exec (about 10 ms on"
    " a loaded machine, so siblings start one after another), and a unit is three execs (setpriv,"
    " sh, sleep) before its delay starts; about 20-30 ms per level of the DAG",
    "plan": "interpreter start and imports (pydantic, the recipe models, click) are"
    " most of the CPU column (see the command line as a whole process); the rest of the wall time is"
    " waiting for a core",
    "rss": "srtd is below circus at both sizes and within 1.2 x supervisord. The job's process never"
    " loads click, the recipe models or pydantic (docs/supervisor.md): a saved plan given alone, as"
    " here, is supervised in the `srtd` process itself; a recipe, in the supervisor `srtd run` execs"
    " once it has planned. With 100 units it holds about 29.6 MiB and the guardian (a dash script)"
    " 0.9. Of the 29.6: the interpreter about 9, asyncio with the ssl module anyio imports"
    " unconditionally about 7.5 (ssl alone 4.3: libcrypto's pages and its enums), anyio 2.2, structlog"
    " 1.3 (without rich, colorama and greenlet), inotify_simple 0.4 (without ctypes.util), srtd's own"
    " modules about 2.5. Each unit costs about 11 KiB: anyio's task (its cancel scope and an event),"
    " the attempt's cancel scope, one coroutine chain, the pidfd's reader, the Popen object, the"
    " journal's events",
    "start_all": "with 100 processes srtd's own start is most of the time. Timed inside the"
    " process (perf's probe of this stop), its first process starts about 0.14 s after `srtd run`:"
    " the interpreter 10 ms; srtd.cli._supervise's imports 28 (json, dataclasses with inspect,"
    " pathlib, typing); the plan's records imported, the plan read and checked 20; the node's check"
    " started 5 (it runs on the other core meanwhile: its verdict is ready when preflight asks, 1"
    " ms); the supervisor's modules 45; the event loop and the job's setup 29 (asyncio and anyio's"
    " backend about 20 of it, which the floor pays too); the first launch 3. The cyclic collector is"
    " paused through all of it and the console's lines wait for the burst. The 100 launches then take"
    " about 0.14 s, 1.4 ms each, what a bare loop of `Popen(setpriv ... sh)` takes here. What is left"
    " above the floor (the line under the table) is mostly import time: srtd's own modules. Since"
    " then srtd's classes and the plan's records generate only what they must (`@value_class`,"
    " `@record`: one `__init__` a class, or none), which took about 25 ms off the first launch;"
    " what is left is the modules' own code, pathlib, ctypes (inotify_simple) and the job's setup",
    **_slurm_report.WHY,
}


def _shortfalls(results: dict[str, dict[str, Any]]) -> list[str]:
    """Every target missed and every measure where srtd trails a peer, said plainly."""
    out = []
    for name, r in results.items():
        met = r.get("met")
        why = f" — {WHY[name]}" if name in WHY else ""
        if isinstance(met, dict):
            for k, v in met.items():
                if not v:
                    start = name == "peers" and " starts " in k  # the peers' start targets
                    out.append(f"- {name}: {k}: **missed**" + (f" — {WHY['start_all']}" if start else ""))
        elif met is False and name != "plan":
            out.append(f"- {name}: target **missed**{why}")
        if name == "plan":
            out += [
                f"- plan: {x['recipe']}: median {x['median_ms']} ms > {x['target_ms']} ms (**missed**){why}"
                for x in r["rows"]
                if x["median_ms"] > x["target_ms"]
            ]
        if name == "peers":
            for peer, ratios in r["ratios"].items():
                out += [
                    f"- peers: srtd trails {peer} on {measure.replace('_', ' ').replace('@', ' with ')}"
                    f" (srtd / {peer} = {v:g})"
                    + (f" — {WHY[measure.split('@')[0]]}" if measure.split("@")[0] in WHY else "")
                    for measure, v in ratios.items()
                    if isinstance(v, float) and v > 1
                ]
    return out or ["- none in this run"]


def _plots(results: dict[str, dict[str, Any]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return  # the bench session installs it; a plain run writes the tables only
    IMAGES.mkdir(parents=True, exist_ok=True)
    watching = results.get("watching")
    if watching:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        labels = [f"{c['units']} {c['watch']}\n{'chatty' if c['chatty'] else 'idle'}" for c in watching["cases"]]
        ax.bar(labels, [c["cpu_percent"] for c in watching["cases"]], color="#4a7ab5")
        ax.axhline(5, color="#b5534a", linestyle="--", linewidth=1, label="5 % (idle target)")
        ax.set_ylabel("srtd CPU, % of one core")
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(IMAGES / "perf-watching.png", dpi=110)
        plt.close(fig)
    peers = results.get("peers")
    if peers:
        names = [p for p, row in peers["rows"].items() if "missing" not in row]
        fig, ax = plt.subplots(figsize=(5, 2.8))
        ax.bar(names, [peers["rows"][p]["exit_to_restart"]["p50_ms"] for p in names], color="#4a7ab5")
        ax.set_yscale("log")
        ax.set_ylabel("crash → restart p50, ms (log)")
        fig.tight_layout()
        fig.savefig(IMAGES / "perf-peers.png", dpi=110)
        plt.close(fig)
    _slurm_report.plot(results, IMAGES)


def write_page() -> Path:
    results = _load()
    _plots(results)
    any_result = next(iter(results.values()), None)
    lines = [
        "# Performance",
        "",
        "<!-- Generated by `nox -s bench` (python -m perf) from perf/results/*.json."
        " Do not edit by hand: rerun the benchmarks. -->",
        "",
        "What srtd costs and how fast it reacts, measured by `perf/` (see its README).",
        "Speed is never asserted in the test suite; it is measured here.",
        "",
    ]
    if any_result:
        m = any_result["machine"]
        lines += _table(
            ["machine", "value"],
            [
                ["CPU", f"{m['cpus']} cores, {m['cpu']}"],
                ["memory", f"{m['memory_mib']} MiB"],
                ["kernel", m["kernel"]],
                ["Python", m["python"]],
                ["commit", m["commit"]],
                ["measured", ", ".join(sorted({r["when"] for r in results.values()}))],
                ["time taken", f"{sum(r['seconds'] for r in results.values()):.0f} s (the sections' times added up)"],
            ],
        )
        lines += [
            "**The machine can be shared**: other work may run on the same 2 cores while these"
            " numbers are taken, so each section gives the load average before and after it ran."
            " Latencies and wall times grow with that load; CPU shares and RSS hardly do. The Slurm"
            " sections load the machine themselves: hundreds of srun clients and slurmstepd processes.",
            "",
        ]
    lines += ["## Where srtd misses a target or trails a peer", "", *_shortfalls(results), ""]
    for name, section in SECTIONS.items():
        if name in results:
            lines += section(results[name])
    PAGE.write_text("\n".join(lines).rstrip() + "\n")
    return PAGE
