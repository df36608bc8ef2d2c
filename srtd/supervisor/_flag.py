"""`Flag`: an event a unit keeps for whoever may wait on it, made only when one does.

An anyio `Event` costs most of a kilobyte (asyncio's event and its waiters' deque); a job
keeps a few per unit (its task done, ready, nudged), and most are never waited on.  A
`Flag` is a bool until a task waits while it is down: then, and only then, the event.
"""

from __future__ import annotations

import anyio
from anyio.lowlevel import checkpoint


class Flag:
    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: anyio.Event | None = None

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        """Until it is set (a checkpoint if it already is, as `anyio.Event.wait`)."""
        if self._set:
            await checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()
