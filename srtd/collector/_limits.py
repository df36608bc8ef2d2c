"""How much of the machine a crowd of connections may take: uvicorn's settings, and what it lacks.

uvicorn bounds a request's headers (`h11_max_incomplete_event_size`), the idle time between
two requests of a connection (`timeout_keep_alive`) and the requests at once
(`limit_concurrency`, a 503 beyond).  It has no deadline for a request's headers: a
connection that sends nothing, or half a request line, is kept for ever, and a few
thousand of them use up the process's file descriptors, after which the accept loop
fails with EMFILE and nobody gets an answer.  `Protocol` adds the two things missing:

- a connection whose request headers are not complete `HEADER_SECONDS` after it opened
  (or after its previous answer) is closed;
- when more than `limit` connections are open, a new one closes the connections that have
  been idle longest (no request in progress) to make room: a request being answered is
  never cut, and a fresh client always gets in.

`limit` is `MAX_CONNECTIONS`, or less when the file-descriptor limit is lower (the soft
limit is raised to the hard one at start where allowed): what asyncio may accept before
`Protocol` sees a connection (a few listen backlogs of `ACCEPT_BATCH`) stays free, so the
accept loop does not run out of descriptors.
"""

from __future__ import annotations

import asyncio
import resource
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 10.0  # from a connection's start (or its previous answer) to a complete request head
KEEP_ALIVE_SECONDS = 5  # idle between two requests of one connection (uvicorn's own)
MAX_HEADER_BYTES = 32 << 10  # a request line and headers larger than this are a 400
MAX_CONNECTIONS = 1000
SPARE_FDS = 64  # kept for the database, its WAL, the demo's jobs and logs
# The listen backlog, which is also how many connections asyncio accepts in one go before any
# of them is seen by `Protocol` (so before room is made): a few such batches are kept free.
ACCEPT_BATCH = 64


def raise_fd_limit() -> int:
    """Raise the soft limit on open files to the hard one (where allowed); the soft limit then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_limit(fd_limit: int) -> int:
    return max(16, min(MAX_CONNECTIONS, fd_limit - SPARE_FDS - 3 * ACCEPT_BATCH))


class Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for request headers and room made for new connections."""

    limit = MAX_CONNECTIONS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.idle_since = time.monotonic()
        self.deadline: asyncio.TimerHandle | None = None
        self._arm()
        if len(self.connections) > self.limit:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.idle_since = time.monotonic()
        self._arm()

    def busy(self) -> bool:
        """A request is being read or answered."""
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
        self.deadline = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _headers_late(self) -> None:
        if not self.busy() and not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        idle = [
            c
            for c in self.connections
            if isinstance(c, Protocol) and c is not self and not c.busy() and not c.transport.is_closing()
        ]
        idle.sort(key=lambda c: c.idle_since)
        for connection in idle[: len(self.connections) - self.limit]:
            connection.transport.close()


def server_settings(fd_limit: int) -> dict[str, Any]:
    """uvicorn.Config's keyword arguments for the bounds above."""
    limit = connection_limit(fd_limit)
    Protocol.limit = limit
    return {
        "http": Protocol,
        "ws": "none",
        "backlog": ACCEPT_BATCH,
        # a 503 only for a burst of requests beyond what eviction leaves room for
        "limit_concurrency": limit + SPARE_FDS // 2,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    }
