"""A real `srtd collector` process on a free port, for the tests that need one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.command import SRTD


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Running:
    url: str
    proc: subprocess.Popen[str]
    stderr: Path

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything that was not already committed."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def collector_env(**tokens: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SRTD_", "SRTCTL_"))}
    return {**base, **tokens}


@contextmanager
def collector(
    db: Path,
    port: int | None = None,
    env: dict[str, str] | None = None,
    *extra: str,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[Running]:
    """`srtd collector --json` until the block ends; its stderr kept in a file beside the db.

    `preexec_fn`: run in the child before it starts (rlimits).
    """
    port = port if port is not None else free_port()
    stderr = db.with_name(f"{db.stem}-{port}-{time.monotonic_ns()}.stderr")
    argv = [*SRTD, "collector", "--db", str(db), "--port", str(port), "--json", *extra]
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env if env is not None else collector_env(),
            preexec_fn=preexec_fn,  # noqa: PLW1509 (only setrlimit, from the test's main thread)
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the JSON line, once it listens
        assert line, f"the collector did not start: {stderr.read_text()}"
        running = Running(json.loads(line)["url"], proc, stderr)
        assert httpx.get(running.url + "/api/health", timeout=5).json() == {"status": "ok", "srtd": {"journal": 1}}
        yield running
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
