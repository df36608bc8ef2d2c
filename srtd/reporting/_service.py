"""`status_service()`: the reporting service a job runs beside, cheap until a plan reports.

Kept apart from `_reporter` so that `srtd run` of a plan without `reporting` imports
neither the reporter nor httpx.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    import httpx

    from srtd.reporting._reporter import StatusReporter
    from srtd.supervisor import ServicePort


def status_service(
    *, transport: httpx.AsyncBaseTransport | None = None, environ: Mapping[str, str] | None = None
) -> Callable[[ServicePort], AbstractAsyncContextManager[StatusReporter | None]]:
    """A `srtd.supervisor` service that reports the job to its plan's collectors.

    Entered before the job starts (it listens to the job's events and starts sending),
    left after the job's final event (the final status gets its bounded last chance).
    A plan without `reporting` makes it do nothing.
    """

    @contextlib.asynccontextmanager
    async def service(job: ServicePort) -> AsyncIterator[StatusReporter | None]:
        if job.plan.reporting is None:
            yield None
            return
        from srtd.reporting._reporter import StatusReporter

        reporter = StatusReporter(job.plan, transport=transport, environ=environ)
        job.listen(reporter)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reporter.run)
            try:
                yield reporter
            finally:
                with anyio.CancelScope(shield=True):  # bounded by `final_wait`
                    await reporter.finish()
                tg.cancel_scope.cancel()

    return service
