"""Inside one Slurm allocation: srtd and plain `srun` doing the same N steps (run by `perf/_slurm.py`).

    python -m perf._slurm_job {launch,exits,teardown,options} --n N --workdir DIR

Every mode writes `DIR/result.json`.  The floor is always the exact srun lines srtd would
run (`srtd.launch.with_srun_lines`), started by this process with `subprocess.Popen`:
no srtd code is on the floor's path.  srtd runs as `python -m srtd run plan.json`, a
process of its own, as under `srtd submit`.  Every task is a shell: it prints
`running <epoch>` as soon as it runs, then sleeps (launch, cost), waits on a FIFO and
prints `exit <epoch>` just before it exits (exits), or obeys SIGTERM after a known
delay (teardown).  Every node is this machine, so every clock is the same clock.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perf._common import cpu_sample, cpu_spent, pct, rss_mib, sig3
from srtd.launch import with_srun_lines
from srtd.topology import slurm_nodes
from srtd.unit import Condition, Edge, Plan, Restart, Unit, UnitKind
from tests.command import SRTD

JOB = os.environ.get("SLURM_JOB_ID", "")
RUNNING = 'echo "running $(date +%s.%N)"'
SLEEP = f"{RUNNING}; exec sleep 3600"


# ---------------------------------------------------------------- units, plans, lines


def units(n: int, tasks: Sequence[tuple[str, ...]], *, graph: bool = True, tiers: Sequence[int] = ()) -> list[Unit]:
    """`head` and n - 1 workers, round-robin over the allocation; with `graph`, each worker
    starts after the head has started (the launch order a frontend-first job has)."""
    nodes = slurm_nodes() or ["node1"]
    out: list[Unit] = []
    for i in range(n):
        name = "head" if i == 0 else f"w{i:03d}"
        after = (Edge(unit="head", condition=Condition.STARTED),) if graph and i else ()
        out.append(
            Unit(
                name=name,
                kind=UnitKind.SERVICE,
                phase="bench",
                nodes=(nodes[i % len(nodes)],),
                argv=tasks[i],
                log=f"{name}.log",
                after=after,
                restart=Restart(),
                critical=False,
                tier=tiers[i] if tiers else 0,
                terminate_timeout=10.0,
            )
        )
    return out


def plan(the_units: Sequence[Unit], log_dir: Path) -> Plan:
    nodes = slurm_nodes() or ["node1"]
    bare = Plan(
        name="slurm-bench",
        job_id=JOB,
        local=False,
        log_dir=str(log_dir),
        nodes={"head": (nodes[0],)},
        allocation=tuple(nodes),
        phases=("bench",),
        units=tuple(the_units),
        hold=True,
    )
    return with_srun_lines(bare, JOB)


def lines(the_plan: Plan) -> dict[str, list[str]]:
    """Each unit's srun argv, exactly as srtd would run it; the log files fresh, as srtd makes them."""
    log_dir = Path(the_plan.log_dir)
    (log_dir / ".srtd-steps").mkdir(parents=True, exist_ok=True)
    for u in the_plan.units:
        (log_dir / u.log).write_bytes(b"")
    return {name: shlex.split(line) for name, line in the_plan.srun_lines.items()}


def stamp(path: Path, word: str) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(word + " "):
            return float(line.split()[1])
    return None


def wait_stamps(the_plan: Plan, word: str = "running", timeout: float = 300.0) -> dict[str, float]:
    """Until every unit's log has its `word <epoch>` line: {unit: epoch}."""
    log_dir = Path(the_plan.log_dir)
    pending = {u.name: log_dir / u.log for u in the_plan.units}
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} of {len(the_plan.units)} units never printed {word!r}")
        for name, path in list(pending.items()):
            t = stamp(path, word)
            if t is not None:
                seen[name] = t
                del pending[name]
        time.sleep(0.05)
    return seen


# ---------------------------------------------------------------- Slurm's own tools


def steps() -> list[str]:
    """This job's step ids that squeue lists (not the batch step)."""
    out = subprocess.run(
        ["squeue", "--steps", f"--jobs={JOB}", "--noheader", "--format=%i"], capture_output=True, text=True, check=False
    ).stdout
    return [s for s in out.split() if s.split(".")[-1].isdigit()]


def wait_no_steps(timeout: float = 120.0, every: float = 0.1) -> float:
    deadline = time.monotonic() + timeout
    while steps():
        if time.monotonic() > deadline:
            raise SystemExit("steps still listed after the teardown")
        time.sleep(every)
    return time.time()


def kill_steps(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """The floor's cleanup: one scancel for every step, then every srun client gone."""
    ids = steps()
    if ids:
        # 22.05 says "Kill job error ... No error" after delivering: the steps leaving squeue is the truth
        subprocess.run(["scancel", "--signal=KILL", *ids], check=False, capture_output=True)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    wait_no_steps(every=0.5)


def popen(argv: list[str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, close_fds=True)


# ---------------------------------------------------------------- srtd as a process


def srtd(the_plan: Plan, root: Path) -> tuple[subprocess.Popen[bytes], float]:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "plan.json"
    path.write_text(the_plan.dumps())
    began = time.time()
    proc = subprocess.Popen(
        [*SRTD, "run", str(path)],
        stdout=open(root / "srtd.out", "wb"),  # noqa: SIM115 - the child holds it
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    return proc, began


def events(the_plan: Plan) -> list[dict[str, Any]]:
    path = Path(the_plan.log_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def first(evs: list[dict[str, Any]], unit: str | None, state: str) -> float | None:
    for e in evs:
        if e.get("unit") == unit and e["state"] == state:
            return float(e["ts"])
    return None


def stop_srtd(proc: subprocess.Popen[bytes], timeout: float = 120.0) -> int:
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout)
    wait_no_steps(every=0.5)
    return code


def srun_clients(parent: int) -> list[int]:
    """Every srun process below `parent` (the client and the helper it forks)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            names[int(entry)] = head.split("(", 1)[1]
            children.setdefault(int(rest.split()[1]), []).append(int(entry))
        except (OSError, IndexError):
            continue
    found: list[int] = []
    todo = [parent]
    while todo:
        for child in children.get(todo.pop(), []):
            if names.get(child) == "srun":
                found.append(child)
                todo.append(child)
    return found


def pss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def cost(pid: int, window: float) -> dict[str, Any]:
    """CPU share and memory of `pid` and, apart, of the srun clients below it, over `window` s."""
    clients = srun_clients(pid)
    c0, t0 = cpu_sample([pid]), time.monotonic()
    s0 = cpu_sample(clients)
    time.sleep(window)
    c1, s1, t1 = cpu_sample([pid]), cpu_sample(clients), time.monotonic()
    own, _ = cpu_spent(c0, c1)
    theirs, _ = cpu_spent(s0, s1)
    return {
        "window_s": round(t1 - t0, 1),
        "srtd_cpu_percent": sig3(100 * own / 1e9 / (t1 - t0)),
        "srtd_rss_mib": round(rss_mib(pid), 1),
        "srtd_threads": threads(pid),
        "srun_processes": len(clients),
        "srun_cpu_percent": sig3(100 * theirs / 1e9 / (t1 - t0)),
        "srun_rss_mib": round(sum(rss_mib(c) for c in clients), 1),
        "srun_pss_mib": round(sum(pss_mib(c) for c in clients), 1),
        "srun_threads": sum(threads(c) for c in clients),
    }


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 1),
        "p99_ms": round(pct(ms, 99), 1),
        "max_ms": round(max(ms), 1),
    }


# ---------------------------------------------------------------- launch


def floor_launch(n: int, root: Path, *, serial: bool) -> dict[str, Any]:
    """The same srun lines from a plain loop: the head first, then the rest as fast as
    Popen goes (parallel) or each once the previous one's task runs (serial)."""
    the_plan = plan(units(n, [("sh", "-c", SLEEP)] * n), root / "logs")
    argvs = lines(the_plan)
    log_dir = Path(the_plan.log_dir)
    began = time.time()
    procs: list[subprocess.Popen[bytes]] = []
    for i, u in enumerate(the_plan.units):
        procs.append(popen(argvs[u.name], log_dir / f"{u.name}.srun"))
        if i == 0 or serial:
            while stamp(log_dir / u.log, "running") is None:
                time.sleep(0.002)
    running = wait_stamps(the_plan)
    kill_steps(procs)
    return {"launch_s": round(max(running.values()) - began, 3)}


def srtd_launch(n: int, root: Path, window: float) -> dict[str, Any]:
    the_plan = plan(units(n, [("sh", "-c", SLEEP)] * n), root / "logs")
    proc, began = srtd(the_plan, root)
    running = wait_stamps(the_plan)
    out: dict[str, Any] = {}
    if window > 0:
        time.sleep(3.0)  # the launches' aftermath settles
        out["cost"] = cost(proc.pid, window)
    code = stop_srtd(proc)
    evs = events(the_plan)
    job_start = first(evs, None, "starting")
    head = first(evs, "head", "starting")
    assert job_start is not None
    assert head is not None
    workers = [first(evs, u.name, "starting") for u in the_plan.units[1:]]
    head_running = running["head"]
    out.update(
        {
            "launch_s": round(max(running.values()) - began, 3),
            "launch_from_journal_s": round(max(running.values()) - job_start, 3),
            "startup_s": round(job_start - began, 3),
            # the graph: no worker's task ran before the head's, no worker launched before its `starting`
            "order_kept": all(w is not None and w >= head for w in workers)
            and all(t >= head_running for name, t in running.items() if name != "head"),
            "srtd_exit_code": code,
        }
    )
    return out


def say(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def launch(n: int, root: Path, window: float) -> dict[str, Any]:
    say("floor, parallel")
    parallel = floor_launch(n, root / "par", serial=False)
    say("floor, serial")
    serial = floor_launch(n, root / "ser", serial=True)
    say("srtd")
    return {"n": n, "floor_parallel": parallel, "floor_serial": serial, "srtd": srtd_launch(n, root / "srtd", window)}


# ---------------------------------------------------------------- exit -> decision


def exit_task(fifo: Path) -> tuple[str, ...]:
    q = shlex.quote(str(fifo))
    return ("sh", "-c", f'{RUNNING}; read -r _ < {q}; echo "exit $(date +%s.%N)"; exit 0')


def release(fifos: Sequence[Path], gap: float) -> None:
    """Open and close each FIFO for writing, `gap` s apart: its reader sees EOF and exits."""
    for fifo in fifos:
        while True:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: its reader has not opened it yet
                time.sleep(0.001)
                continue
            os.close(fd)
            break
        time.sleep(gap)


def exit_plan(n: int, root: Path) -> tuple[Plan, list[Path]]:
    fifo_dir = root / "fifo"
    fifo_dir.mkdir(parents=True)
    fifos = [fifo_dir / f"f{i}" for i in range(n)]
    for f in fifos:
        os.mkfifo(f)
    the_plan = plan(units(n, [exit_task(f) for f in fifos], graph=False), root / "logs")
    order = list(range(n))
    random.Random(n).shuffle(order)
    return the_plan, [fifos[i] for i in order]


def floor_exits(n: int, root: Path, gap: float) -> dict[str, Any]:
    the_plan, fifos = exit_plan(n, root)
    argvs = lines(the_plan)
    log_dir = Path(the_plan.log_dir)
    procs = {u.name: popen(argvs[u.name], log_dir / f"{u.name}.srun") for u in the_plan.units}
    wait_stamps(the_plan)
    ended: dict[int, float] = {}

    def reap() -> None:  # the floor: the moment each plain srun client returns
        while len(ended) < n:
            pid, _ = os.wait()
            ended[pid] = time.time()

    reaper = threading.Thread(target=reap)
    reaper.start()
    release(fifos, gap)
    reaper.join(120)
    stamps = wait_stamps(the_plan, "exit")
    ms = [(ended[procs[name].pid] - t) * 1000 for name, t in stamps.items()]
    wait_no_steps(every=0.5)
    return summary(ms)


def srtd_exits(n: int, root: Path, gap: float) -> dict[str, Any]:
    the_plan, fifos = exit_plan(n, root)
    proc, _ = srtd(the_plan, root)
    wait_stamps(the_plan)
    time.sleep(1.0)
    release(fifos, gap)
    stamps = wait_stamps(the_plan, "exit")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        evs = events(the_plan)
        decided = {e["unit"]: float(e["ts"]) for e in evs if e["state"] == "exited" and "unit" in e}
        if len(decided) == n:
            break
        time.sleep(0.2)
    code = stop_srtd(proc)
    ms = [(decided[name] - t) * 1000 for name, t in stamps.items()]
    return {**summary(ms), "srtd_exit_code": code}


def exits(n: int, root: Path, gap: float) -> dict[str, Any]:
    return {
        "n": n,
        "gap_s": gap,
        "floor": floor_exits(n, root / "floor", gap),
        "srtd": srtd_exits(n, root / "srtd", gap),
    }


# ---------------------------------------------------------------- teardown


def delays(n: int) -> tuple[list[float], list[int], float]:
    rng = random.Random(11)
    ds = [round(rng.uniform(0.1, 1.0), 3) for _ in range(n)]
    ts = [i % 3 for i in range(n)]
    expected = sum(max(d for d, t in zip(ds, ts, strict=True) if t == tier) for tier in range(3))
    return ds, ts, expected


def teardown_plan(n: int, root: Path) -> Plan:
    ds, ts, _ = delays(n)
    tasks = [("sh", "-c", f"trap 'sleep {d}; exit 0' TERM; {RUNNING}; sleep 3600 & wait") for d in ds]
    return plan(units(n, tasks, graph=False, tiers=ts), root / "logs")


def floor_teardown(n: int, root: Path) -> dict[str, Any]:
    """Plain tools, tier by tier: one scancel --signal=TERM for the tier's steps, wait for its clients."""
    the_plan = teardown_plan(n, root)
    argvs = lines(the_plan)
    log_dir = Path(the_plan.log_dir)
    procs = {u.name: popen(argvs[u.name], log_dir / f"{u.name}.srun") for u in the_plan.units}
    wait_stamps(the_plan)
    time.sleep(1.0)
    began = time.time()
    for tier in range(3):
        tier_units = [u for u in the_plan.units if u.tier == tier]
        ids = [(log_dir / ".srtd-steps" / f"{u.name}.id").read_text().strip() for u in tier_units]
        subprocess.run(["scancel", "--signal=TERM", "--full", *ids], check=False, capture_output=True)
        for u in tier_units:
            procs[u.name].wait(60)
    gone = wait_no_steps()
    return {"teardown_s": round(gone - began, 3)}


def srtd_teardown(n: int, root: Path) -> dict[str, Any]:
    the_plan = teardown_plan(n, root)
    proc, _ = srtd(the_plan, root)
    wait_stamps(the_plan)
    time.sleep(1.0)  # every shell has set its trap
    began = time.time()
    proc.send_signal(signal.SIGTERM)
    gone = wait_no_steps()
    code = proc.wait(60)
    ended = time.time()
    evs = events(the_plan)
    last = max(float(e["ts"]) for e in evs if e["state"] == "stopped" and "unit" in e)
    return {
        "teardown_s": round(gone - began, 3),
        "last_stopped_s": round(last - began, 3),
        "srtd_exited_s": round(ended - began, 3),
        "srtd_exit_code": code,
    }


def teardown(n: int, root: Path) -> dict[str, Any]:
    _, _, expected = delays(n)
    return {
        "n": n,
        "sum_of_tier_maxima_s": round(expected, 3),
        "floor": floor_teardown(n, root / "floor"),
        "srtd": srtd_teardown(n, root / "srtd"),
    }


# ---------------------------------------------------------------- srun's own cost, by option


def options(n: int, root: Path, window: float) -> dict[str, Any]:
    """n plain srun clients of each shape, their memory and CPU while their tasks sleep."""
    nodes = slurm_nodes() or ["node1"]
    shapes: dict[str, list[str]] = {"srtd's line": []}
    shapes["minimal"] = ["--overlap"]  # marker: built below
    shapes["srtd's line + --threads=1"] = ["--threads=1"]
    out: dict[str, Any] = {}
    for label, extra in shapes.items():
        sub = root / label.replace(" ", "_").replace("'", "").replace("+", "").replace("=", "")
        the_plan = plan(units(n, [("sh", "-c", SLEEP)] * n, graph=False), sub / "logs")
        argvs = lines(the_plan)
        if label == "minimal":
            argvs = {
                u.name: ["srun", f"--jobid={JOB}", "--overlap", f"--nodelist={nodes[i % len(nodes)]}",
                         "-N1", "-n1", f"--output={Path(the_plan.log_dir) / u.log}", "sh", "-c", SLEEP]
                for i, u in enumerate(the_plan.units)
            }  # fmt: skip
        elif extra:
            argvs = {name: [a[0], *extra, *a[1:]] for name, a in argvs.items()}
        log_dir = Path(the_plan.log_dir)
        procs = [popen(argvs[u.name], log_dir / f"{u.name}.srun") for u in the_plan.units]
        wait_stamps(the_plan)
        time.sleep(2.0)
        measured = cost(os.getpid(), window)
        out[label] = {k.removeprefix("srun_"): v for k, v in measured.items() if k.startswith(("srun", "window"))}
        kill_steps(procs)
    return {"n": n, "shapes": out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["launch", "exits", "teardown", "options"])
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--window", type=float, default=0.0)
    p.add_argument("--gap", type=float, default=0.02)
    args = p.parse_args(argv)
    root = Path(args.workdir)
    if args.mode == "launch":
        result = launch(args.n, root, args.window)
    elif args.mode == "exits":
        result = exits(args.n, root, args.gap)
    elif args.mode == "teardown":
        result = teardown(args.n, root)
    else:
        result = options(args.n, root, args.window)
    (root / "result.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
