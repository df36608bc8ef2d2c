"""`status_service()` plugged into `supervise`: a whole (fake) job's reports, in order."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import pytest

from srtd.launch import FakeLauncher, FakeRun
from srtd.reporting import status_service
from srtd.supervisor import NullConsole, ScaledClock, supervise
from srtd.unit import Plan, StatusReporting, Unit, UnitKind

pytestmark = pytest.mark.anyio


def unit(name: str, phase: str, kind: UnitKind, **fields: object) -> Unit:
    return Unit(name=name, kind=kind, phase=phase, nodes=("n1",), argv=("fake",), log=f"{name}.log", **fields)  # type: ignore[arg-type]


def plan(tmp_path: Path, reporting: StatusReporting | None) -> Plan:
    return Plan(
        name="svc",
        job_id="5",
        local=True,
        log_dir=str(tmp_path),
        nodes={"head": ("n1",)},
        allocation=("n1",),
        phases=("workers", "benchmark"),
        units=(
            unit("w", "workers", UnitKind.WORKER),
            unit("bench", "benchmark", UnitKind.BENCHMARK, terminal=True),
        ),
        reporting=reporting,
    )


async def run_job(tmp_path: Path, reporting: StatusReporting | None, transport: httpx.AsyncBaseTransport) -> int:
    clock = ScaledClock(20.0)
    launcher = FakeLauncher({"bench": FakeRun(exit_after=1.0, code=3)}, clock=clock)
    service = status_service(transport=transport, environ={"T": "tok"})
    with anyio.fail_after(30):
        result = await supervise(
            plan(tmp_path, reporting), launcher, clock=clock, console=NullConsole(), services=[service]
        )
    return result.exit_code


async def test_the_service_reports_the_job_it_runs_beside(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201 if request.method == "POST" else 200)

    settings = StatusReporting(endpoints=("http://c",), token_env="T", units=False)  # the plain contract alone
    assert await run_job(tmp_path, settings, httpx.MockTransport(answer)) == 3
    bodies = [json.loads(r.content) for r in seen]
    assert [(r.method, b.get("status"), b.get("stage")) for r, b in zip(seen, bodies, strict=True)] == [
        ("POST", None, None),
        ("PUT", "starting", "starting"),
        ("PUT", "workers", "workers"),
        ("PUT", "benchmark", "benchmark"),
        ("PUT", "failed", "benchmark"),  # where the failure happened
        ("PUT", "failed", "cleanup"),
    ]
    assert bodies[-1]["exit_code"] == 3
    assert {r.headers["authorization"] for r in seen} == {"Bearer tok"}


async def test_without_reporting_in_the_plan_the_service_sends_nothing(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200))  # type: ignore[func-returns-value]
    assert await run_job(tmp_path, None, transport) == 3
    assert seen == []
