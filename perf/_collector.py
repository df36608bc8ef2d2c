"""The collector under a PUT storm: 1000 status updates from 20 jobs at once, each timed.

A real `srtd collector` process (write token set, SQLite in WAL with synchronous=NORMAL
in a temporary directory) on a free loopback port; 20 reporters at once, one kept-alive
connection per job with one request in flight (as srtd's reporter sends), offering
`RATE` PUTs per second in all: 1000 in 2.5 s.  The client writes the requests as bytes
so that its own cost stays out of the numbers.  Measured at the client: every PUT's time
from sending to the whole answer.  Target: p99 under 50 ms.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx

from perf._common import pct
from tests.command import SRTD

TARGET_P99_MS = 50.0
JOBS = 20
TOKEN = "bench-collector-token"
RATE = 400.0  # PUTs per second offered in all: 1000 in 2.5 s


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _filesystem(path: Path) -> str:
    best = ("", "?")
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, where, kind, *_ = line.split()
            if str(path).startswith(where) and len(where) > len(best[0]):
                best = (where, kind)
    return best[1]


def _request(method: str, path: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: collector\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def _exchange(stream: anyio.abc.SocketStream, buffer: bytearray, request: bytes) -> int:
    """Send one request on a kept-alive connection; its status code once the whole answer is in."""
    await stream.send(request)
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive()
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(v) for k, _, v in (ln.partition(b":") for ln in lines[1:]) if k.lower() == b"content-length")
    while len(rest) < length:
        rest += await stream.receive()
    buffer[:] = rest[length:]
    return int(lines[0].split()[1])


async def _storm(port: int, total: int, rate: float | None) -> tuple[list[float], float]:
    """`total` PUTs at `rate` per second in all (None: as fast as answered), JOBS connections, one in flight each."""
    per_job = total // JOBS
    interval = JOBS / rate if rate else 0.0  # seconds between one job's PUTs
    times: list[float] = []

    async def job(n: int) -> None:
        job_id = f"storm-{n}"
        buffer = bytearray()
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            body = {"job_id": job_id, "job_name": "storm", "submitted_at": "2026-12-01T00:00:00+00:00"}
            assert await _exchange(stream, buffer, _request("POST", "/api/jobs", body)) == 201
            await anyio.sleep(n * interval / JOBS)  # spread the jobs over the interval
            due = time.perf_counter()
            for i in range(per_job):
                update = {
                    "status": "benchmark",
                    "stage": "benchmark",
                    "updated_at": "2026-12-01T00:00:01+00:00",
                    "message": f"update {i}",
                    "metadata": {"progress": i},
                }
                request = _request("PUT", f"/api/jobs/{job_id}", update)
                began = time.perf_counter()
                assert await _exchange(stream, buffer, request) == 200
                times.append((time.perf_counter() - began) * 1000)
                due += interval
                await anyio.sleep(max(0.0, due - time.perf_counter()))

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(JOBS):
            tg.start_soon(job, n)
    return times, time.perf_counter() - began


def _run(total: int, rate: float | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="srtd-bench-collector-") as work:
        db = Path(work) / "c.db"
        port = _free_port()
        env = {**os.environ, "SRTD_COLLECTOR_TOKEN": TOKEN}
        argv = [*SRTD, "collector", "--db", str(db), "--port", str(port), "--json"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None
            url = json.loads(proc.stdout.readline())["url"]
            times, wall = anyio.run(_storm, port, total, rate)
            job = httpx.get(f"{url}/api/jobs/storm-0", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        filesystem = _filesystem(db)
    return {
        "offered_per_s": rate,
        "requests": len(times),
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(times) / wall, 1),
        "p50_ms": round(pct(times, 50), 1),
        "p90_ms": round(pct(times, 90), 1),
        "p99_ms": round(pct(times, 99), 1),
        "max_ms": round(max(times), 1),
        "last_recorded": job["message"] == f"update {total // JOBS - 1}",
        "filesystem": filesystem,
    }


def put_storm(quick: bool) -> dict[str, Any]:
    total = 200 if quick else 1000
    storm, flat_out = _run(total, RATE), _run(total, None)
    return {
        "jobs": JOBS,
        "rows": [storm, flat_out],
        "filesystem": storm["filesystem"],
        "target_p99_ms": TARGET_P99_MS,
        "met": storm["p99_ms"] < TARGET_P99_MS and storm["last_recorded"],
    }
