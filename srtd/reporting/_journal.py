"""srtd's richer feed: the job's journal events, batched, to `srtd collector`'s extension route.

With `reporting.status.units` unset (the default), each collector is asked first
(`GET /api/health`): one that answers `"srtd": {"journal": 1}` (an srtd collector) gets
the feed, any other (srtctl's) gets nothing more than the plain contract.  With
`units: true` every collector gets it, with `false` none.  Every event goes into a bounded queue per
collector; a background task sends what has queued up as one batch
(`POST /api/srtd/jobs/{job_id}/journal`, at most `JOURNAL_BATCH` events), so a burst
of unit events costs a few requests, not one each.  Nothing waits on the job's behalf:
a full queue drops the event (counted), a batch is tried `ATTEMPTS` times and then
given up.  A collector without the route (srtctl's: 404 or 405) is told nothing more:
the job's reporting falls back to the plain contract, which its `Sender` carries anyway.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import anyio

from srtd._httpx import httpx
from srtd.events import Event
from srtd.status_api import HEALTH_ROUTE, JOURNAL_BATCH, JOURNAL_ROUTE

QUEUE = 4096  # events waiting per collector; more are dropped
ATTEMPTS = 3
RETRY_PAUSE = 0.5  # seconds between the attempts of a batch
NO_ROUTE = (404, 405)


class JournalSender:
    def __init__(self, endpoint: str, job_id: str, client: httpx.AsyncClient, log: Any, *, ask: bool = False) -> None:
        self.url = endpoint + JOURNAL_ROUTE.format(job_id=quote(job_id, safe=":"))
        self.ask = ask  # ask the collector's health answer first whether it takes journals
        self.endpoint = endpoint
        self.client = client
        self.log = log
        self.supported = True  # until the collector says it has no such route
        self.sent = 0  # events the collector acknowledged
        self.dropped = 0
        self.batches: list[int] = []  # each batch's size: for tests
        self.idle = anyio.Event()
        self._hurry = anyio.Event()
        self._send, self._receive = anyio.create_memory_object_stream[Event](QUEUE)

    def offer(self, event: Event) -> None:
        if not self.supported:
            return
        try:
            self._send.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dropped += 1

    def close(self) -> None:
        self._send.close()
        self._hurry.set()

    async def run(self) -> None:
        try:
            async with self._receive:
                if self.ask:
                    self.supported = await self._takes_journals()
                async for first in self._receive:
                    batch = [first]
                    while len(batch) < JOURNAL_BATCH:
                        try:
                            batch.append(self._receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    if self.supported:
                        await self._deliver(batch)
        finally:
            self.idle.set()

    async def _takes_journals(self) -> bool:
        """The collector says it takes journals (`"srtd": {"journal": 1}` in its health answer).
        Asked up to `ATTEMPTS` times; a collector still unreachable is taken at its word: no."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self.client.get(self.endpoint + HEALTH_ROUTE)
                answer = response.json() if response.status_code == 200 else {}
            except (httpx.HTTPError, ValueError) as err:
                self.log.debug("collector health not read", endpoint=self.endpoint, error=type(err).__name__)
            else:
                srtd = answer.get("srtd") if isinstance(answer, dict) else None
                journal = srtd.get("journal") if isinstance(srtd, dict) else None
                takes = isinstance(journal, int) and not isinstance(journal, bool) and journal >= 1
                if not takes:
                    self.log.debug("collector takes no journal: plain contract only", endpoint=self.endpoint)
                return takes
            if attempt < ATTEMPTS:
                with anyio.move_on_after(RETRY_PAUSE):
                    await self._hurry.wait()
        return False

    async def _deliver(self, batch: list[Event]) -> None:
        body = {"events": [e.as_json() for e in batch]}
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self.client.post(self.url, json=body)
            except httpx.HTTPError as err:
                self.log.debug(
                    "journal batch not sent", endpoint=self.endpoint, attempt=attempt, error=type(err).__name__
                )
            else:
                if response.status_code in NO_ROUTE:
                    self.supported = False
                    self.log.debug("collector has no journal route: plain contract only", endpoint=self.endpoint)
                    return
                if response.status_code < 300:
                    self.sent += len(batch)
                    self.batches.append(len(batch))
                    return
                if response.status_code < 500:  # refused (401, 413, 422): trying again changes nothing
                    self.log.debug("journal batch refused", endpoint=self.endpoint, status=response.status_code)
                    return
            if attempt < ATTEMPTS:
                with anyio.move_on_after(RETRY_PAUSE):
                    await self._hurry.wait()
        self.dropped += len(batch)
