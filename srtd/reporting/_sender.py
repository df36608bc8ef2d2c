"""Sending requests to one collector: a bounded queue drained by a background task.

Nothing here ever waits on the job's behalf: `offer` drops a request when the queue
is full, each request gets `ATTEMPTS` tries of at most `TIMEOUT` seconds, redirects
are never followed.  A 3xx, 401 or 403 is a warning (a login page in front of the
collector, a wrong token); a 4xx is a warning too (the collector refused the body);
each once per collector and answer.  Network errors and 5xx are debug lines.  No header, so no token, is ever logged.
"""

from __future__ import annotations

from typing import Any

import anyio

from srtd._httpx import httpx
from srtd.reporting._contract import Request

TIMEOUT = 5.0  # seconds per request
ATTEMPTS = 2
RETRY_PAUSE = 0.5  # seconds between the attempts
QUEUE = 64  # requests waiting per collector; more are dropped
# A request in flight this long at the job's end means the collector hangs: it is not
# waited for.  A collector that has not answered anything yet gets less benefit of the doubt.
STUCK_AFTER = 1.0  # seconds, once the collector has answered
FIRST_ANSWER_WITHIN = 0.25  # seconds, before it has


class Sender:
    def __init__(self, endpoint: str, client: httpx.AsyncClient, log: Any) -> None:
        self.endpoint = endpoint
        self.client = client
        self.log = log
        self.sent: list[tuple[Request, int | None]] = []  # (request, status or None): for tests
        self.dropped = 0
        self.idle = anyio.Event()  # set once the queue is closed and drained
        self.busy_since: float | None = None  # when the request in flight was first tried
        self.answered = False  # the collector has answered (any HTTP status) at least once
        self._hurry = anyio.Event()  # the job ended: no more pauses between attempts
        self._warned: set[int] = set()  # answers already warned about: one warning each
        self._send, self._receive = anyio.create_memory_object_stream[Request](QUEUE)

    def offer(self, request: Request) -> None:
        try:
            self._send.send_nowait(request)
        except anyio.WouldBlock:
            self.dropped += 1
            self.log.debug("status update dropped: queue full", endpoint=self.endpoint)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dropped += 1

    def close(self) -> None:
        """No more requests: `run` drains what is queued without pausing, then ends."""
        self._send.close()
        self._hurry.set()

    def stuck(self) -> bool:
        """A request has been in flight for too long: the collector hangs."""
        patience = STUCK_AFTER if self.answered else FIRST_ANSWER_WITHIN
        return self.busy_since is not None and anyio.current_time() - self.busy_since > patience

    async def run(self) -> None:
        try:
            async with self._receive:
                async for request in self._receive:
                    self.busy_since = anyio.current_time()
                    try:
                        code = await self._deliver(request)
                    except Exception as err:  # a reporting problem must never end the job
                        self.log.debug("status update not sent", endpoint=self.endpoint, error=type(err).__name__)
                        code = None
                    self.sent.append((request, code))
                    self.busy_since = None
        finally:
            self.idle.set()

    async def _deliver(self, request: Request) -> int | None:
        url = self.endpoint + request.path
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self.client.request(request.method, url, json=request.body)
            except httpx.HTTPError as err:
                self.log.debug(
                    "status collector unreachable", endpoint=self.endpoint, attempt=attempt, error=type(err).__name__
                )
            else:
                self.answered = True
                code = response.status_code
                if code < 300:
                    return code
                if code < 500:
                    self._warn(request, code)
                    return code
                self.log.debug("status collector error", endpoint=self.endpoint, status=code, attempt=attempt)
            if attempt < ATTEMPTS:
                with anyio.move_on_after(RETRY_PAUSE):
                    await self._hurry.wait()
        return None

    def _warn(self, request: Request, code: int) -> None:
        if code in self._warned:
            self.log.debug("status collector refused again", endpoint=self.endpoint, status=code)
            return
        self._warned.add(code)
        if 300 <= code < 400:
            why = "redirected (not followed): a login page in front of the collector?"
        elif code in (401, 403):
            why = "refused the token: check the token variable"
        else:
            why = "refused the request"
        self.log.warning(
            f"status collector {why}", endpoint=self.endpoint, method=request.method, path=request.path, status=code
        )
