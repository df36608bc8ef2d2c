"""Liveness: is a ready unit still serving, or is it hung?

A hung engine (stuck in a collective, a deadlocked scheduler) keeps its process
alive and often its port open; only a check that needs the program itself to answer
sees it.  `LivenessWatcher` runs for one ready attempt: once per `period_seconds`
(on the injectable clock) it judges the period, and `failure_threshold` failed
periods in a row make the attempt `unhealthy`.  A period fails when

- the tcp/http probe fails or takes longer than `timeout_seconds` (a frozen HTTP
  server accepts the connection in the kernel and then never answers);
- a log probe (a heartbeat) saw no matching line since the last period;
- `log_silence_seconds` have passed without any new line in the unit's log.

A passing period resets the count.  The watcher is started by the unit only once it
is ready and is cancelled with the attempt, so it never probes a unit that is still
starting; `stopping()` is asked before every check and before the verdict, so it
never probes (or condemns) a unit the job has begun to stop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from srtd._value import value_class
from srtd.patterns import compile_log_pattern
from srtd.supervisor._clock import Clock, within
from srtd.supervisor._probes import ProbeResult, check, describe
from srtd.supervisor._tail import LogLine
from srtd.unit import Liveness, LogProbe

if TYPE_CHECKING:
    import httpx


@value_class
class Unhealthy:
    """The verdict: what failed, how many times in a row, and the last error."""

    probe: str
    failures: int
    last: str

    @property
    def reason(self) -> str:
        return f"unhealthy: {self.probe} failed {self.failures} times (last: {self.last})"

    def detail(self) -> dict[str, Any]:
        """The journal's `detail.unhealthy` (docs/events.md)."""
        return {"probe": self.probe, "failures": self.failures, "last": self.last}


class LivenessWatcher:
    """Judges the periods of one ready attempt.  Feed it the attempt's log lines."""

    def __init__(
        self,
        liveness: Liveness,
        *,
        clock: Clock,
        http: httpx.AsyncClient,
        host: str | None,
        generation: int,
    ) -> None:
        self.liveness = liveness
        self.clock = clock
        self.http = http
        self.host = host
        self.generation = generation
        probe = liveness.probe
        self.heartbeat = compile_log_pattern(probe.pattern) if isinstance(probe, LogProbe) else None
        self.last_line = clock.now()  # silence is counted from ready at the earliest
        self.beat_seen = False

    def on_line(self, line: LogLine) -> None:
        if line.generation < self.generation:
            return  # a line of an earlier attempt's file
        self.last_line = self.clock.now()
        if self.heartbeat is not None and self.heartbeat.search(line.text):
            self.beat_seen = True

    async def run(self, stopping: Callable[[], bool]) -> Unhealthy:
        """Until `failure_threshold` periods in a row have failed (or the caller cancels)."""
        live = self.liveness
        failures = 0
        began = self.clock.now()
        period = 0
        while True:
            period += 1
            await self.clock.sleep(began + period * live.period_seconds - self.clock.now())
            if stopping():
                await anyio.sleep_forever()  # the job stops this unit; nothing more to judge
            failed = await self.check_period()
            if failed is None:
                failures = 0
                continue
            failures += 1
            if failures >= live.failure_threshold and not stopping():
                name, error = failed
                return Unhealthy(name, failures, error)

    async def check_period(self) -> tuple[str, str] | None:
        """(what failed, why) for a failed period, None for a good one."""
        live = self.liveness
        probe = live.probe
        if probe is not None and not isinstance(probe, LogProbe):
            host = self.host or probe.node
            outcome: list[ProbeResult] = []

            async def once() -> None:
                outcome.append(await check(probe, host=host, client=self.http, timeout=live.timeout_seconds))

            if not await within(self.clock, live.timeout_seconds, once):
                return describe(probe, host), f"no answer within {live.timeout_seconds:g} s"
            if not outcome[0].ok:
                return describe(probe, host), outcome[0].detail
        if self.heartbeat is not None:
            seen, self.beat_seen = self.beat_seen, False
            if not seen:
                assert isinstance(probe, LogProbe)
                return describe(probe), f"no matching line in {live.period_seconds:g} s"
        silence = live.log_silence_seconds
        if silence is not None:
            quiet = self.clock.now() - self.last_line
            if quiet >= silence:
                return f"log silence ({silence:g} s)", f"no new log line for {quiet:.0f} s"
        return None
