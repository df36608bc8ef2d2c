"""Does a crowd of `srtd attach` clients slow the supervisor down?

    python perf/attach_load.py [--clients 100] [--restarts 40] [--rounds 3]

Runs a real `srtd run` of a plan with one unit that crashes in a loop (restart
always, 0.1 s backoff).  Each attempt lives 0.2 s (so the launch's own events have
been sent to every client), then writes `time.time()` to its log as the very last
thing before `os._exit(1)`; the latency of an exit is the timestamp of the decision
that follows it (the `backoff` event of the next restart, which comes after the
`exited` event and its fan-out to the clients) minus that.  Rounds alternate between no client and `--clients` clients
subscribed to the job's socket (one separate process holding every connection and
reading every event), and the medians are compared.  The target: under 5 % slower.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.command import SRTD

REPO = Path(__file__).resolve().parents[1]
CRASH = (
    "import os, sys, time\n"
    "time.sleep(float(sys.argv[1]) if os.environ.get('SRTD_ATTEMPT') == '0' else 0.2)\n"
    "sys.stdout.write(repr(time.time()))\n"
    "sys.stdout.flush()\n"
    "os._exit(1)\n"
)


def plan_json(root: Path, restarts: int, settle: float) -> Path:
    sys.path.insert(0, str(REPO))
    from srtd.unit import Plan, Restart, RestartMode, Unit, UnitKind

    restart = Restart(policy=RestartMode.ALWAYS, max_restarts=restarts, backoff_seconds=0.1, max_backoff_seconds=0.1)
    unit = Unit(
        name="crash",
        kind=UnitKind.SERVICE,
        phase="bench",
        nodes=("node0",),
        argv=(sys.executable, "-S", "-c", CRASH, str(settle)),
        log="crash.log",
        restart=restart,
        critical=False,
    )
    plan = Plan(
        name="attach-load",
        job_id="attach-load",
        local=True,
        log_dir=str(root / "logs"),
        nodes={"head": ("node0",)},
        allocation=("node0",),
        phases=("bench",),
        units=(unit,),
    )
    path = root / "plan.json"
    path.write_text(plan.dumps())
    return path


def latencies(log_dir: Path) -> list[float]:
    from srtd.supervisor import read_journal

    events = read_journal(log_dir / "events.jsonl")
    exited = {e.attempt: e.ts for e in events if e.state == "exited"}
    # the decision: the backoff (restart n) or the final state after the last exit
    decided = {e.attempt: e.ts for e in events if e.unit and e.state in ("backoff", "failed", "stopped")}
    found = []
    last = max(a or 0 for a in exited)
    for attempt in exited:
        log = log_dir / ("crash.log" if (attempt or 0) == last else f"crash.log.{(attempt or 0) + 1}")
        text = log.read_text().strip()
        decision = decided.get((attempt or 0) + 1, decided.get(attempt))
        if text and attempt and decision is not None:  # attempt 0 waited for the clients
            found.append(decision - float(text))
    return found


def hold_clients(path: str, count: int) -> None:
    """(In a child process) subscribe `count` times and read everything until the job ends."""
    selector = selectors.DefaultSelector()
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b'{"cmd": "subscribe"}\n')
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
    print("connected", flush=True)
    open_count = count
    while open_count:
        for key, _ in selector.select():
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            if not sock.recv(65536):
                selector.unregister(sock)
                sock.close()
                open_count -= 1


def one_round(clients: int, restarts: int) -> list[float]:
    root = Path(tempfile.mkdtemp(prefix="srtd-bench-"))
    runtime = root / "rt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SRTD_RUNTIME_DIR"] = str(runtime)
    settle = 3.0 if clients else 1.0
    plan = plan_json(root, restarts, settle)
    with open(root / "srtd.out", "w") as out:
        job = subprocess.Popen([*SRTD, "run", str(plan)], cwd=REPO, env=env, stdout=out, stderr=out)
    holder = None
    try:
        if clients:
            sock = runtime / "attach-load.sock"
            while not sock.exists():
                time.sleep(0.01)
            holder = subprocess.Popen(
                [sys.executable, __file__, "--hold", str(sock), str(clients)], stdout=subprocess.PIPE, text=True
            )
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "connected"
        job.wait(timeout=600)
        if holder is not None:
            holder.wait(timeout=60)
        return latencies(root / "logs")
    finally:
        for proc in (job, holder):
            if proc is not None and proc.poll() is None:
                proc.kill()
        shutil.rmtree(root, ignore_errors=True)


def summary(label: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[int(len(ms) * 0.9) - 1]
    return (
        f"{label:12} median {statistics.median(ms):.2f} ms, p90 {p90:.2f} ms, max {ms[-1]:.2f} ms over {len(ms)} exits"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hold", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold:
        hold_clients(args.hold[0], int(args.hold[1]))
        return
    alone: list[float] = []
    crowded: list[float] = []
    for _ in range(args.rounds):
        alone += one_round(0, args.restarts)
        crowded += one_round(args.clients, args.restarts)
    print(summary("no client", alone))
    print(summary(f"{args.clients} clients", crowded))
    change = statistics.median(crowded) / statistics.median(alone) - 1
    print(f"median exit -> decision latency with {args.clients} subscribed clients: {change:+.1%}")


if __name__ == "__main__":
    main()
