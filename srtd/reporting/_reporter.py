"""`StatusReporter`: the job's events in, status requests out, never in the job's way.

Called with every event (synchronously, from the journal), it folds the event into
requests and queues them for each collector; its `run` task sends them; `finish`
gives the last ones (the final status) at most `FINAL_WAIT` seconds.
`status_service()` plugs it into `srtd.supervisor.supervise` as a service.
`report_submitted` is the POST of `srtd submit`.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from srtd._files import read_back
from srtd._httpx import httpx
from srtd._structlog import structlog
from srtd.events import Event
from srtd.reporting._contract import Request, job_created
from srtd.reporting._fold import StageFold
from srtd.reporting._journal import JournalSender
from srtd.reporting._sender import TIMEOUT, Sender
from srtd.unit import Plan, StatusReporting

if TYPE_CHECKING:
    pass

BENCHMARK_RESULTS = "benchmark.json"  # what the benchmark units write into the log dir
MAX_RESULTS = 512 * 1024  # bytes: larger results stay in the log dir (a collector refuses bodies over 1 MiB)
MAX_POWER_WINDOWS = 1000  # windows carried into the results at most
POWER_MANIFEST = "manifest.json"  # the power sampler's verdict in `plan.power.dir` (srtd.reporting._power)
FINAL_WAIT = 0.5  # seconds the job's end waits for the last requests to go out
SUBMIT_WAIT = 5.0  # seconds `report_submitted` waits at most, every collector and attempt included


def power_of(manifest: Path) -> dict[str, Any] | None:
    """What the power manifest (docs/services.md) says of each measurement window, for the collector's
    tok/s per W: `{"status", "windows": [{"concurrency", "benchmark_type", "mean_power_w", "energy_j",
    "covered"}]}`; None without a readable manifest.  Written by the after-job hook, so it is there
    by the time the final update goes out."""
    try:
        doc = json.loads(read_back(manifest, limit=MAX_RESULTS, error=ValueError))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("windows"), list):
        return None
    windows = []
    for window in doc["windows"][:MAX_POWER_WINDOWS]:
        if isinstance(window, dict):
            keys = ("concurrency", "benchmark_type", "mean_power_w", "energy_j")
            windows.append({k: window.get(k) for k in keys} | {"covered": window.get("power_coverage_valid") is True})
    return {"status": doc.get("status"), "windows": windows}


def _logger() -> Any:
    """Warnings to stderr (stdout may carry `--json` events); debug lines dropped."""
    return structlog.wrap_logger(
        structlog.PrintLogger(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(colors=False, pad_event_to=28),
        ],
    )


def _user() -> str | None:
    """Who runs the job, for the dashboard's user filter."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


def _client(
    settings: StatusReporting, environ: Mapping[str, str], transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncClient:
    token = (environ.get(settings.token_env) or "").strip()  # a token file's trailing newline is no part of it
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=transport, timeout=TIMEOUT, follow_redirects=False, trust_env=False, headers=headers
    )


class StatusReporter:
    """Reports one job's lifecycle to the collectors of `plan.reporting`."""

    def __init__(
        self,
        plan: Plan,
        *,
        post_job: bool | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
        final_wait: float = FINAL_WAIT,
        log: Any = None,
    ) -> None:
        if plan.reporting is None:
            raise ValueError("the plan has no reporting section")
        self.settings = plan.reporting
        self.fold = StageFold(plan, post_job=plan.local if post_job is None else post_job, user=_user())
        self.final_wait = final_wait
        self.log = log if log is not None else _logger()
        self.client = _client(self.settings, os.environ if environ is None else environ, transport)
        self.senders = [Sender(ep, self.client, self.log) for ep in self.settings.endpoints]
        job_id = self.fold.job_id
        self.journals = (
            [
                JournalSender(ep, job_id, self.client, self.log, ask=self.settings.units is None)
                for ep in self.settings.endpoints
            ]
            if self.settings.units is not False
            else []
        )
        self.results_file = Path(plan.log_dir) / BENCHMARK_RESULTS
        self.power_manifest = Path(plan.power.dir) / POWER_MANIFEST if plan.power is not None else None

    def __call__(self, event: Event) -> None:
        try:
            requests = self.fold.feed(event)
        except Exception as err:  # a reporting bug must never fail the job
            self.log.debug("status fold failed", error=repr(err))
            return
        for journal in self.journals:
            journal.offer(event)
        for request in requests:
            request = self._with_results(request)
            for sender in self.senders:
                sender.offer(request)

    def _with_results(self, request: Request) -> Request:
        """The final PUT carries the benchmark's results (`benchmark.json` in the log dir), when there are."""
        if request.method != "PUT" or request.body.get("stage") != "cleanup" or "completed_at" not in request.body:
            return request
        try:
            results = json.loads(read_back(self.results_file, limit=MAX_RESULTS, error=ValueError))
        except (OSError, ValueError):
            return request
        if not isinstance(results, dict):
            return request
        power = power_of(self.power_manifest) if self.power_manifest is not None else None
        if power is not None:
            results = {**results, "power": power}
        return Request(request.method, request.path, {**request.body, "benchmark_results": results})

    async def run(self) -> None:
        """Send until `finish`; cancel it after that."""
        async with self.client, anyio.create_task_group() as tg:
            for sender in self.senders:
                tg.start_soon(sender.run)
            for journal in self.journals:
                tg.start_soon(journal.run)

    async def finish(self) -> None:
        """The job ended: let the queued requests go out for at most `final_wait` seconds.

        A collector with a request hanging since well before the end is not waited for
        at all: it would not take the final status within the bound anyway.
        """
        waited = [s for s in self.senders if not s.stuck()]
        answering = {s.endpoint for s in waited}
        for sender in self.senders:
            sender.close()
        for journal in self.journals:
            journal.close()
        with anyio.move_on_after(self.final_wait):
            for sender in waited:
                await sender.idle.wait()
            for journal in self.journals:
                if journal.endpoint in answering:
                    await journal.idle.wait()


async def post_submitted(
    settings: StatusReporting,
    job_id: str,
    *,
    job_name: str,
    recipe: str | None = None,
    metadata: dict[str, Any] | None = None,
    submitted_at: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
    log: Any = None,
) -> bool:
    """POST a submitted job to every collector; True when every one accepted it (2xx)."""
    request: Request = job_created(
        settings.job_id_prefix + job_id,
        job_name=job_name,
        cluster=settings.cluster,
        recipe=recipe,
        submitted_at=time.time() if submitted_at is None else submitted_at,
        metadata=metadata,
    )
    log = log if log is not None else _logger()
    async with _client(settings, os.environ if environ is None else environ, transport) as client:
        senders = [Sender(ep, client, log) for ep in settings.endpoints]
        with anyio.move_on_after(SUBMIT_WAIT):
            async with anyio.create_task_group() as tg:
                for sender in senders:
                    sender.offer(request)
                    sender.close()
                    tg.start_soon(sender.run)
    return all(s.sent and s.sent[0][1] is not None and s.sent[0][1] < 300 for s in senders)


def report_submitted(
    settings: StatusReporting | None,
    job_id: str,
    *,
    job_name: str,
    recipe: str | None = None,
    metadata: dict[str, Any] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> bool:
    """`srtd submit`'s POST of a job it submitted (tags go in `metadata["tags"]`).

    Synchronous, at most `SUBMIT_WAIT` seconds in all; False when nothing is configured
    or a collector did not accept it in time.  Never raises for a collector's failure.
    """
    if settings is None or not settings.endpoints:
        return False

    async def post() -> bool:
        return await post_submitted(
            settings, job_id, job_name=job_name, recipe=recipe, metadata=metadata, transport=transport
        )

    return anyio.run(post)
