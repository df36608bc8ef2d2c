"""How long srtd takes to call a frozen worker unhealthy, against period x threshold.

    python perf/liveness_detect.py [--runs 5]

For each (period, threshold, timeout) below, a real toy worker (`srtd.toy.worker`, an
HTTP server) runs under the supervisor with an HTTP liveness probe of its /health.
Once it is ready the benchmark waits a random fraction of a period (so the freeze
falls anywhere between two checks), freezes it with SIGSTOP, and measures the time
from the SIGSTOP to the journal's `stopping` event carrying `detail.unhealthy`.

What to expect: checks run every `period` from ready; the first failing check starts
at the first tick after the freeze and each failing check ends at its timeout, so the
decision comes (threshold - 1) x period + timeout after the first tick following the
freeze: between (threshold - 1) x period + timeout and threshold x period + timeout.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from srtd.events import Event  # noqa: E402
from srtd.launch import LocalLauncher  # noqa: E402
from srtd.supervisor import NullConsole, supervise  # noqa: E402
from srtd.unit import HttpProbe, Liveness, Plan, Readiness, Unit, UnitKind  # noqa: E402

CASES = ((0.5, 3, 0.25), (1.0, 3, 0.5), (2.0, 2, 1.0))  # period, threshold, timeout (seconds)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Watch(NullConsole):
    """Notes the worker's pid and when it is ready."""

    def __init__(self) -> None:
        self.ready = anyio.Event()
        self.pid: int | None = None

    def event(self, event: Event) -> None:
        if event.unit == "w" and event.state == "starting":
            self.pid = event.pid
        if event.unit == "w" and event.state == "ready":
            self.ready.set()


async def one_run(period: float, threshold: int, timeout: float, root: Path) -> float:
    port = free_port()
    unit = Unit(
        name="w",
        kind=UnitKind.WORKER,
        phase="workers",
        nodes=("node0",),
        argv=(sys.executable, "-c", "from srtd.toy.worker import main; main()", "--port", str(port)),
        log="w.log",
        readiness=Readiness(probe=HttpProbe(node="node0", port=port), timeout_seconds=30, interval_seconds=0.5),
        liveness=Liveness(
            probe=HttpProbe(node="node0", port=port),
            period_seconds=period,
            timeout_seconds=timeout,
            failure_threshold=threshold,
        ),
        terminate_timeout=10.0,
    )
    plan = Plan(
        name="liveness-bench",
        job_id="bench",
        local=True,
        log_dir=str(root),
        nodes={"head": ("node0",)},
        allocation=("node0",),
        phases=("workers",),
        units=(unit,),
        hold=True,
    )
    console = Watch()
    frozen_at: list[float] = []

    async def freeze() -> None:
        await console.ready.wait()
        await anyio.sleep(random.uniform(0, period))  # anywhere between two checks
        assert console.pid is not None
        frozen_at.append(time.time())  # the journal's clock
        os.kill(console.pid, signal.SIGSTOP)

    async with anyio.create_task_group() as tg:
        tg.start_soon(freeze)
        result = await supervise(plan, LocalLauncher(guardian_grace=1.0), console=console)
    decided = next(e.ts for e in result.events if e.unit == "w" and e.state == "stopping" and e.detail)
    return decided - frozen_at[0]


async def main_async(runs: int) -> None:
    print(f"{'period':>7} {'threshold':>9} {'timeout':>7}   expected window      measured (min / median / max)")
    for period, threshold, timeout in CASES:
        times = []
        for i in range(runs):
            with tempfile.TemporaryDirectory(prefix="srtd-liveness-bench-") as tmp:
                times.append(await one_run(period, threshold, timeout, Path(tmp) / f"run{i}"))
        low = (threshold - 1) * period + timeout
        high = threshold * period + timeout
        print(
            f"{period:>6g}s {threshold:>9} {timeout:>6g}s   {low:5.2f} s .. {high:5.2f} s   "
            f"{min(times):5.2f} / {statistics.median(times):5.2f} / {max(times):5.2f} s over {runs} runs"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main_async, args.runs)


if __name__ == "__main__":
    main()
