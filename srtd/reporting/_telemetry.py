"""What `srtd run` is given for power telemetry: a service and an after-job hook that share
one `PowerSampler` (`_power.py`).

A plan without `power` costs nothing, not even the sampler's import (csv and the sampler's
code: about 0.3 MiB held for the job's whole life): `_power` is imported when the service
finds exporters to read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import anyio

from srtd.errors import EXIT_POWER
from srtd.supervisor import AfterJob, AfterJobFailure, AfterJobHook, Service
from srtd.unit import UnitKind

if TYPE_CHECKING:
    import httpx

    from srtd.reporting._power import PowerSampler
    from srtd.supervisor import ServicePort


def power_telemetry(
    *, transport: httpx.AsyncBaseTransport | None = None, clock: Callable[[], float] = time.time
) -> tuple[Service, AfterJobHook]:
    """(service, after-job hook) sharing one sampler: sample while the job runs, judge after it."""
    current: list[PowerSampler] = []

    @contextlib.asynccontextmanager
    async def service(job: ServicePort) -> AsyncIterator[PowerSampler | None]:
        power = job.plan.power
        if power is None or not power.endpoints:
            yield None
            return
        from srtd.reporting._power import PowerSampler

        clients = [u.name for u in job.plan.units if u.kind is UnitKind.BENCHMARK]
        sampler = PowerSampler(power, clients=clients, transport=transport, clock=clock)
        job.listen(sampler.read_now)
        current.append(sampler)
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            try:
                yield sampler
            finally:
                sampler.finish()  # a job that failed still gets its manifest

    async def check_power(job: AfterJob) -> AfterJobFailure | None:
        if not current:
            return None
        sampler = current[0]
        verdict = sampler.finish()  # a few small files: read and written in place
        covered = sum(w.valid for w in verdict.windows)
        reasons = f": {', '.join(verdict.reasons)}" if verdict.reasons else ""
        text = f"power {verdict.status}: {covered}/{len(verdict.windows)} windows covered{reasons}"
        job.note(text, {"power": verdict.summary()})
        if verdict.valid or not sampler.power.required:
            return None
        return AfterJobFailure(EXIT_POWER, f"telemetry.required: {text}", {"power": verdict.summary()})

    return service, check_power


__all__ = ["power_telemetry"]
