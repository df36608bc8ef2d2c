"""Real toy processes for the tests: spawn, read their log lines, signal, and reap.

Every process is started through `Toy`, which the `toy` fixture tears down: anything
still running is killed and reaped, and the test fails if a process survives.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
from anyio.streams.buffered import BufferedByteReceiveStream

REPO = Path(__file__).resolve().parents[2]
#: Generous bound for anything the tests wait on; a healthy run needs a fraction of it.
TIMEOUT = 15.0


def free_port() -> int:
    """A port nothing listens on right now (for processes that must not own it yet)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ToyProcess:
    """One child process, its output read on demand (the toy programs print little)."""

    def __init__(self, name: str, process: anyio.abc.Process) -> None:
        self.name = name
        self.process = process
        self.lines: list[str] = []
        assert process.stdout is not None
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._eof = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def _read_line(self) -> bool:
        if self._eof:
            return False
        try:
            raw = await self._stdout.receive_until(b"\n", 1 << 20)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            self._eof = True
            return False
        self.lines.append(raw.decode(errors="replace"))
        return True

    async def wait_for_line(self, pattern: str, timeout: float = TIMEOUT) -> str:
        """The first output line matching `pattern` (re.search), reading more as needed."""
        regex = re.compile(pattern)
        seen = 0
        with anyio.fail_after(timeout):
            while True:
                for line in self.lines[seen:]:
                    if regex.search(line):
                        return line
                seen = len(self.lines)
                if not await self._read_line():
                    raise AssertionError(f"{self.name} ended without a line matching {pattern!r}:\n{self.log}")

    async def port(self) -> int:
        """The port named by the program's `ready on HOST:PORT` line."""
        line = await self.wait_for_line(r": ready on \S+:\d+$")
        return int(line.rsplit(":", 1)[1])

    async def url(self) -> str:
        return f"http://127.0.0.1:{await self.port()}"

    def send(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def wait(self, timeout: float = TIMEOUT) -> int:
        """Read the output to its end and reap the process; returns its exit code."""
        with anyio.fail_after(timeout):
            while await self._read_line():
                pass
            return await self.process.wait()

    async def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = TIMEOUT) -> int:
        self.send(sig)
        return await self.wait(timeout)

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def count(self, pattern: str) -> int:
        regex = re.compile(pattern)
        return sum(1 for line in self.lines if regex.search(line))


class Toy:
    """Starts toy programs and guarantees none outlives the test."""

    def __init__(self) -> None:
        self.processes: list[ToyProcess] = []

    async def start(self, module: str, *args: Any) -> ToyProcess:
        argv = [sys.executable, "-m", f"srtd.toy.{module}", *map(str, args)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
        process = await anyio.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO, env=env
        )
        child = ToyProcess(module, process)
        self.processes.append(child)
        return child

    async def worker(self, *args: Any, port: int = 0, latency_ms: float = 1) -> ToyProcess:
        return await self.start("worker", "--port", port, "--token-latency-ms", latency_ms, *args)

    async def router(self, *args: Any, port: int = 0) -> ToyProcess:
        return await self.start("router", "--port", port, "--health-interval", 0.05, *args)

    async def bench(self, *args: Any) -> ToyProcess:
        return await self.start("bench", *args)

    async def close(self) -> None:
        survivors = []
        for child in self.processes:
            if child.returncode is None:
                child.process.kill()
            # Shielded (the test may be ending by cancellation) but still bounded.
            with anyio.CancelScope(shield=True), anyio.fail_after(TIMEOUT):
                await child.process.wait()
            await child.process.aclose()
            try:
                os.kill(child.pid, 0)
            except ProcessLookupError:
                continue
            survivors.append(child.pid)
        assert not survivors, f"processes left behind: {survivors}"


async def get_json(url: str, expect: int = 200) -> Any:
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.get(url)
    assert response.status_code == expect, response.text
    return response.json()


async def post(url: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
        return await client.post(url, json=body, **kwargs)


async def post_stream(url: str, body: dict[str, Any]) -> tuple[httpx.Response, list[str]]:
    """POST and collect the `data:` payloads of a server-sent-event answer."""
    async with (
        httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client,
        client.stream("POST", url, json=body) as response,
    ):
        events = [line.removeprefix("data: ") async for line in response.aiter_lines() if line.startswith("data: ")]
    return response, events


async def poll(predicate: Any, timeout: float = TIMEOUT, interval: float = 0.02) -> Any:
    """Await `predicate()` until it returns something truthy; return that."""
    with anyio.fail_after(timeout):
        while True:
            value = await predicate()
            if value:
                return value
            await anyio.sleep(interval)
