"""The supervisor's notion of time: an injectable clock.

Every delay that is part of supervision semantics goes through a `Clock`: restart
backoff, readiness timeouts and probe intervals, terminate timeouts, run timeouts,
the stability window.  Plumbing delays that are not semantics (the log tailer's poll,
the probe's per-attempt I/O timeout, the reap after SIGKILL) use real time.

`SystemClock` is anyio's loop clock.  `ScaledClock` runs virtual time `speed` times
faster than real time, so a test can script a 10 s backoff and wait 0.1 s for it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds (any origin)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time, as the event loop measures it."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(seconds, 0.0))


class ScaledClock:
    """Virtual seconds that pass `speed` times faster than real ones (tests)."""

    def __init__(self, speed: float = 100.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._origin = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._origin) * self.speed

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(seconds, 0.0) / self.speed)


async def within(clock: Clock, seconds: float, fn: Callable[[], Awaitable[object]]) -> bool:
    """Run `fn` for at most `seconds` of `clock` time.  True if it finished in time."""
    finished = False
    async with anyio.create_task_group() as tg:

        async def _deadline() -> None:
            await clock.sleep(seconds)
            tg.cancel_scope.cancel()

        tg.start_soon(_deadline)
        await fn()
        finished = True
        tg.cancel_scope.cancel()
    return finished


async def wait_any(*events: anyio.Event) -> None:
    """Until any of `events` is set."""
    for event in events:
        if event.is_set():
            return
    async with anyio.create_task_group() as tg:

        async def _one(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(_one, event)
