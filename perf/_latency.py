"""Latency scenarios, srtd supervising in this process: exits, readiness, makespan, teardown."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from perf._common import (
    events_of,
    marks,
    plan,
    prog,
    run_held,
    run_job,
    summary_ms,
    unit,
    wait_for_state,
)
from srtd.supervisor import Stop
from srtd.unit import (
    Condition,
    Count,
    Edge,
    HttpProbe,
    LogProbe,
    Readiness,
    Restart,
    RestartMode,
    TcpProbe,
    WorkerCountProbe,
)


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


# ---------------------------------------------------------------- exit -> decision


def exits(quick: bool) -> dict[str, Any]:
    """Units that crash again and again, restarted with backoff 0."""
    crashes = 15 if quick else 40  # per unit; three units: a p99 over more than 100 exits
    with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp:
        root = Path(tmp)
        restart = Restart(policy=RestartMode.ON_FAILURE, max_restarts=crashes, backoff_seconds=0.0)
        names = ["crash0", "crash1", "crash2"]
        units = [
            unit(n, prog("--marker", str(root / f"{n}.marks"), "--exit-after", "0.05", "--code", "3"),
                 restart=restart, critical=False)
            for n in names
        ]  # fmt: skip
        result = anyio.run(lambda: run_job(plan(units, root / "logs")))
        decision: list[float] = []
        relaunch: list[float] = []
        running: list[float] = []
        for n in names:
            m = marks(root / f"{n}.marks")
            exit_marks = [t for e, t in m if e == "exit"]
            start_marks = [t for e, t in m if e == "start"]
            exited = events_of(result, n, "exited")
            starting = events_of(result, n, "starting")
            for i, t_exit in enumerate(exit_marks):
                if i < len(exited):
                    decision.append(exited[i] - t_exit)
                if i + 1 < len(starting):
                    relaunch.append(starting[i + 1] - t_exit)
                if i + 1 < len(start_marks):
                    running.append(start_marks[i + 1] - t_exit)
    return {
        "title": "Exit → decision",
        "crashes": len(decision),
        "exit_to_decision": summary_ms(decision),
        "exit_to_relaunch": summary_ms(relaunch),
        "exit_to_running": summary_ms(running),
        "target_p99_ms": 50,
        "met": summary_ms(decision)["p99_ms"] <= 50,
    }


# ---------------------------------------------------------------- readiness


ROUTER = (sys.executable, "-m", "srtd.toy.router")


def _readiness_job(t: float, copies: int, light: bool, gate: bool) -> dict[str, list[float]]:
    """One job: `copies` of each probe case (`light`: tcp/http/log; `gate`: a toy router
    counting two workers), all ready `t` s after launch.  Latencies by case, in seconds."""
    with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp:
        root = Path(tmp)
        units = []
        cases: list[tuple[str, str, Path]] = []  # (unit, case, marker)
        gates: list[tuple[str, int]] = []  # (router unit, router port)
        for c in range(copies):
            p_tcp, p_tcp_silent, p_http, p_http_silent, p_router, p_w0, p_w1 = _free_ports(7)
            specs = [
                ("tcp", ["--tcp", str(p_tcp), "--say", f"listening on port {p_tcp}"],
                 Readiness(probe=TcpProbe(node="node0", port=p_tcp))),
                ("tcp-silent", ["--tcp", str(p_tcp_silent)],
                 Readiness(probe=TcpProbe(node="node0", port=p_tcp_silent))),
                ("http", ["--http", str(p_http), "--say", f"Uvicorn running on http://127.0.0.1:{p_http}"],
                 Readiness(probe=HttpProbe(node="node0", port=p_http), interval_seconds=10)),
                ("http-silent", ["--http", str(p_http_silent)],
                 Readiness(probe=HttpProbe(node="node0", port=p_http_silent), interval_seconds=10)),
                ("log", ["--say", "The server is fired up and ready to roll!"],
                 Readiness(probe=LogProbe(pattern="fired up"))),
            ]  # fmt: skip
            for case, args, ready in specs if light else []:
                name = f"{case}_{c}"
                marker = root / f"{name}.marks"
                units.append(unit(name, prog("--marker", str(marker), "--after", str(t), *args), readiness=ready))
                cases.append((name, case, marker))
            if not gate:
                continue
            for w, port in (("w0", p_w0), ("w1", p_w1)):
                units.append(unit(f"{w}_{c}", prog("--http", str(port), "--after", str(t))))
            counts = (Count(field="stats.decode_count"),)
            probe = WorkerCountProbe(node="node0", port=p_router, path="/workers", decode=counts, expect_decode=2)
            router_argv = [*ROUTER, "--port", str(p_router), "--decode", f"http://127.0.0.1:{p_w0}",
                           "--decode", f"http://127.0.0.1:{p_w1}"]  # fmt: skip
            units.append(unit(f"gate_{c}", router_argv, readiness=Readiness(probe=probe, interval_seconds=10)))
            gates.append((f"gate_{c}", p_router))
        registered: dict[str, float] = {}

        async def watch_routers(stop: Stop) -> None:
            """When each router counts both workers: polled every 20 ms from outside."""
            async with httpx.AsyncClient(trust_env=False) as client:
                while len(registered) < len(gates):
                    for name, port in gates:
                        if name in registered:
                            continue
                        try:
                            r = await client.get(f"http://127.0.0.1:{port}/workers", timeout=1)
                            if r.json()["stats"]["decode_count"] >= 2:
                                registered[name] = time.time()
                        except (httpx.HTTPError, ValueError, KeyError):
                            pass
                    await anyio.sleep(0.02)
            await wait_for_state(root / "logs", "running")
            stop.request()

        result = anyio.run(lambda: run_job(plan(units, root / "logs", hold=True), while_running=watch_routers))
        rows: dict[str, list[float]] = {}
        for name, case, marker in cases:
            ready_mark = next(tm for e, tm in marks(marker) if e == "ready")
            rows.setdefault(case, []).append(events_of(result, name, "ready")[0] - ready_mark)
        for name, _ in gates:
            rows.setdefault("gate", []).append(events_of(result, name, "ready")[0] - registered[name])
    return rows


def readiness(quick: bool) -> dict[str, Any]:
    """tcp / http / log / the worker-count gate, ready 0.5 s and 10 s after launch.

    The gates run in jobs of their own: the outside poll of the routers (every 20 ms)
    and the routers' imports would otherwise load the CPU the other cases are timed on.
    """
    repeats = 1 if quick else 3
    rows: dict[str, dict[str, list[float]]] = {}

    def add(t: float, got: dict[str, list[float]]) -> None:
        for case, values in got.items():
            rows.setdefault(case, {}).setdefault(str(t), []).extend(values)

    for _ in range(repeats):
        add(0.5, _readiness_job(0.5, 1, light=True, gate=False))
        add(0.5, _readiness_job(0.5, 1, light=False, gate=True))
    copies = 1 if quick else 3
    add(10.0, _readiness_job(10.0, copies, light=True, gate=False))
    add(10.0, _readiness_job(10.0, copies, light=False, gate=True))
    table = {case: {t: summary_ms(v) for t, v in by_t.items()} for case, by_t in rows.items()}
    met = {
        "tcp/http/log late ≤ 100 ms": all(table[c]["10.0"]["max_ms"] <= 100 for c in ("tcp", "http", "log")),
        "gate late ≤ 250 ms": table["gate"]["10.0"]["max_ms"] <= 250,
    }
    return {"title": "Readiness latency", "latency": table, "met": met}


# ---------------------------------------------------------------- makespan


def _random_dag(seed: int, n: int) -> tuple[list[float], list[list[int]]]:
    rng = random.Random(seed)
    delays = [round(rng.uniform(0.1, 0.8), 3) for _ in range(n)]
    parents = [sorted(rng.sample(range(i), k=min(i, rng.randint(0, 3)))) for i in range(n)]
    return delays, parents


def _depth(parents: list[list[int]]) -> int:
    level: list[int] = []
    for ps in parents:
        level.append(max((level[p] for p in ps), default=0) + 1)
    return max(level)


def _critical_path(delays: list[float], parents: list[list[int]]) -> float:
    finish: list[float] = []
    for i, d in enumerate(delays):
        finish.append(max((finish[p] for p in parents[i]), default=0.0) + d)
    return max(finish)


def makespan(quick: bool) -> dict[str, Any]:
    """Seeded random DAGs of 100 units (log-probed start-up delays) vs their critical path."""
    seeds = [1] if quick else [1, 2]
    runs = []
    ratios: list[float] = []
    for seed in seeds:
        delays, parents = _random_dag(seed, 100)
        critical = _critical_path(delays, parents)
        with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp:
            root = Path(tmp)
            units = [
                unit(
                    f"u{i:03d}",
                    ["sh", "-c", f"sleep {d}; echo ready; exec sleep 3600"],
                    readiness=Readiness(probe=LogProbe(pattern="^ready$")),
                    after=[Edge(unit=f"u{p:03d}", condition=Condition.READY) for p in parents[i]],
                )
                for i, d in enumerate(delays)
            ]
            result = run_held(plan(units, root / "logs", hold=True))
        began = events_of(result, None, "starting")[0]
        ready = [events_of(result, f"u{i:03d}", "ready")[0] for i in range(100)]
        launched = [events_of(result, f"u{i:03d}", "starting")[0] for i in range(100)]
        measured = max(ready) - began
        # where the overhead goes: srtd deciding to launch once the parents are ready, and
        # the process (fork, exec of sh, of sleep) plus the log line reaching srtd
        decide = [launched[i] - max((ready[p] for p in parents[i]), default=began) for i in range(100)]
        start = [ready[i] - launched[i] - delays[i] for i in range(100)]
        ratios.append(measured / critical)
        runs.append(
            {"seed": seed, "critical_path_s": round(critical, 3), "makespan_s": round(measured, 3),
             "ratio": round(measured / critical, 4), "depth": _depth(parents),
             "ready_to_launch": summary_ms(decide), "launch_to_ready_minus_delay": summary_ms(start)}
        )  # fmt: skip
    met = all(measured_ratio <= 1.05 for measured_ratio in ratios)
    return {"title": "Makespan", "runs": runs, "target_ratio": 1.05, "met": met}


# ---------------------------------------------------------------- teardown


def teardown(quick: bool) -> dict[str, Any]:
    """100 units over 3 tiers, each taking a known time to obey SIGTERM."""
    rng = random.Random(7)
    delays = [round(rng.uniform(0.1, 1.0), 3) for _ in range(100)]
    tiers = [i % 3 for i in range(100)]
    expected = sum(max(d for d, t in zip(delays, tiers, strict=True) if t == tier) for tier in range(3))
    with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp:
        root = Path(tmp)
        units = [
            unit(f"u{i:03d}", ["sh", "-c", f'trap "sleep {d}; exit 0" TERM; sleep 3600 & wait'],
                 tier=tiers[i], terminate_timeout=10.0)
            for i, d in enumerate(delays)
        ]  # fmt: skip
        result = run_held(plan(units, root / "logs", hold=True), settle=0.5)  # every shell has set its trap
    began = events_of(result, None, "stopping")[0]
    ended = max(events_of(result, f"u{i:03d}", "stopped")[0] for i in range(100))
    measured = ended - began
    return {
        "title": "Teardown",
        "sum_of_tier_maxima_s": round(expected, 3),
        "teardown_s": round(measured, 3),
        "overhead_s": round(measured - expected, 3),
        "target_overhead_s": 0.5,
        "met": measured - expected <= 0.5,
    }
