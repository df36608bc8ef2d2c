"""Watching a running attempt (`watch_attempt`): its log's lines (fatal patterns, the log
readiness probe, the nudges), its process's exit, the readiness probe (with its timeout),
from ready on the liveness watch, and the run timer.  Each ends the attempt through
`finish`; the first to call it wins.

An attempt costs one cancel scope and no task of its own: the unit's task awaits the exit
itself.  Only an attempt with other watchers (a readiness probe, a run timeout, a liveness
watch) opens a task group for them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from srtd.launch import ExitStatus, Handle
from srtd.supervisor._attempt import AttemptEnd
from srtd.supervisor._clock import within
from srtd.supervisor._flag import Flag
from srtd.supervisor._probes import NudgeBucket, ProbePacer, check, describe
from srtd.supervisor._tail import LogLine, Tailer
from srtd.unit import FileProbe, HttpProbe, Liveness, LogProbe, Readiness, TcpProbe, WorkerCountProbe

if TYPE_CHECKING:
    from srtd.supervisor._unit import UnitRunner

Finish = Callable[[AttemptEnd], None]


class Attempt:
    """The running attempt of a unit: its cancel scope and how it ended."""

    __slots__ = ("end", "generation", "runner", "scope")

    def __init__(self, runner: UnitRunner, generation: int) -> None:
        self.runner = runner
        self.generation = generation  # lines of an earlier attempt's file are not this one's
        self.scope = anyio.CancelScope()
        self.end: AttemptEnd | None = None

    def finish(self, result: AttemptEnd) -> None:
        """End the attempt as `result` says, unless it has already ended."""
        if self.end is None:
            self.end = result
            self.scope.cancel()

    def on_line(self, line: LogLine) -> None:
        """A line of the attempt's log: echoed, matched for readiness and fatal patterns."""
        if line.generation < self.generation:
            return  # a line of an earlier attempt's file
        runner = self.runner
        text = line.text
        if runner.unit.echo:
            runner.port.echo(runner.name, text)
        if not runner.ready_now:
            if runner.log_ready is None:
                runner.nudged.set()  # servers announce that they listen: probe now
            elif runner.log_ready.search(text):
                runner.mark_ready()
        for pattern in runner.fatal:
            if pattern.search(text):
                runner.port.record_fatal(runner.name, text)
                self.finish(AttemptEnd("fatal", f"fatal log line: {text}"))
                return


async def watch_attempt(runner: UnitRunner, handle: Handle) -> AttemptEnd:
    """Watch the launched attempt until the first watcher ends it; how it ended."""
    unit = runner.unit
    tailer = runner.port.tailer(runner.log_path)
    attempt = Attempt(runner, tailer.generation)
    runner.watching = attempt
    finish = attempt.finish
    try:
        with tailer.watch(attempt.on_line), attempt.scope:
            if unit.readiness is None and unit.run_timeout is None and unit.liveness is None:
                runner.mark_ready()
                exited(runner, await handle.wait(), tailer, finish)  # awaited here: no frame more per unit
            else:
                async with anyio.create_task_group() as tg:
                    if unit.readiness is not None:
                        tg.start_soon(watch_readiness, runner, unit.readiness, finish)
                    else:
                        runner.mark_ready()
                    if unit.run_timeout is not None:
                        tg.start_soon(run_timer, runner, unit.run_timeout, finish)
                    if unit.liveness is not None:
                        tg.start_soon(watch_liveness, runner, unit.liveness, tailer, attempt.generation, finish)
                    exited(runner, await handle.wait(), tailer, finish)
    finally:
        runner.watching = None
    assert attempt.end is not None
    return attempt.end


def exited(runner: UnitRunner, status: ExitStatus, tailer: Tailer, finish: Finish) -> None:
    """The attempt's process has ended as `status` says."""
    runner.status = status
    with contextlib.suppress(OSError):
        tailer.poll()  # judge what it wrote before it exited before judging the exit
    finish(AttemptEnd("exit"))


async def run_timer(runner: UnitRunner, seconds: float, finish: Finish) -> None:
    await runner.port.clock.sleep(seconds)
    finish(AttemptEnd("run-timeout", f"did not finish within {seconds:g} s"))


async def watch_readiness(runner: UnitRunner, readiness: Readiness, finish: Finish) -> None:
    """Ready within the timeout (the unit is marked ready), or the attempt ends `not-ready`."""
    probe = readiness.probe
    clock = runner.port.clock

    async def until_ready() -> None:
        if isinstance(probe, LogProbe):
            await runner.ready_event.wait()
            return
        async with anyio.create_task_group() as tg:
            if isinstance(probe, WorkerCountProbe):
                tg.start_soon(_nudge_on_changes, runner)  # a worker became ready: ask the gate
            await _probe_until_ready(runner, probe, readiness.interval_seconds)
            tg.cancel_scope.cancel()

    if await within(clock, readiness.timeout_seconds, until_ready):
        runner.mark_ready()
        return
    reason = f"not ready within {readiness.timeout_seconds:g} s"
    if runner.last_probe:
        reason += f" (last probe: {describe(probe, _probe_host(runner))}: {runner.last_probe})"
    if isinstance(probe, LogProbe) and runner.port.log_space_full:
        reason += " (the log file system is full: the line it waits for may have been lost)"
    finish(AttemptEnd("not-ready", reason))


async def watch_liveness(
    runner: UnitRunner, liveness: Liveness, tailer: Tailer, generation: int, finish: Finish
) -> None:
    """From ready on (never before), until the attempt ends: is it still alive?"""
    await runner.ready_event.wait()
    port = runner.port
    probe = liveness.probe
    host = None if probe is None or isinstance(probe, LogProbe) else port.address(probe.node)
    from srtd.supervisor._liveness import LivenessWatcher  # only a unit with a liveness probe loads it

    watcher = LivenessWatcher(liveness, clock=port.clock, http=port.http, host=host, generation=generation)
    with tailer.watch(watcher.on_line):
        verdict = await watcher.run(lambda: port.stopping)
    finish(AttemptEnd("unhealthy", verdict.reason, detail={"unhealthy": verdict.detail()}))


async def _probe_until_ready(
    runner: UnitRunner, probe: TcpProbe | HttpProbe | FileProbe | WorkerCountProbe, interval: float
) -> None:
    """Probe now, then when the pacer's clock says so or a nudge is granted."""
    clock = runner.port.clock
    host = runner.port.address(probe.node)
    pacer = ProbePacer(probe, interval, clock.now())
    bucket = NudgeBucket(anyio.current_time())
    while not runner.ready_now:
        runner.nudged = Flag()  # nudges from now on count for the next probe
        result = await check(probe, host=host, client=runner.port.http)
        if result.ok:
            return
        runner.last_probe = result.detail
        delay = pacer.after(clock.now(), result)
        due = clock.now() + delay
        while True:
            nudged = runner.nudged
            if await within(clock, due - clock.now(), nudged.wait):
                if not pacer.nudge(clock.now()):
                    runner.nudged = Flag()  # held: wait for the clock
                    continue
                await anyio.sleep(bucket.wait(anyio.current_time()))
                bucket.take(anyio.current_time())
            break


async def _nudge_on_changes(runner: UnitRunner) -> None:
    while True:
        await runner.port.changed()
        runner.nudged.set()


def _probe_host(runner: UnitRunner) -> str | None:
    readiness = runner.unit.readiness
    probe = readiness.probe if readiness is not None else None
    if probe is None or isinstance(probe, LogProbe):
        return None
    return runner.port.address(probe.node)
