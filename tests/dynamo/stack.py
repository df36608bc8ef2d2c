"""The real Dynamo stack for the tests of `nox -s dynamo`: what the session prepared, and runs of it.

The session sets SRTD_DYNAMO_E2E=1 and points at the pieces (SRTD_DYNAMO_BIN: the
ai-dynamo venv's bin; SRTD_DYNAMO_AIPERF; SRTD_DYNAMO_MODEL; SRTD_DYNAMO_ETCD,
SRTD_DYNAMO_NATS).  Outside the session the tests skip; inside it a missing piece
fails with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from tests.command import SRTD

REPO = Path(__file__).resolve().parents[2]
AGG = REPO / "recipes" / "local" / "dynamo-agg.yaml"
DISAGG = REPO / "recipes" / "local" / "dynamo-disagg.yaml"
FRONTEND = "http://127.0.0.1:8000"
# The fixed ports of the local Dynamo recipes: etcd, NATS, the frontend.
PORTS = {2379: "etcd client", 2380: "etcd peer", 4222: "NATS", 8000: "the frontend"}

in_session = pytest.mark.skipif(
    os.environ.get("SRTD_DYNAMO_E2E") != "1", reason="the real Dynamo stack runs in `nox -s dynamo`"
)


@dataclass(frozen=True)
class Stack:
    bin: Path  # the ai-dynamo venv's bin: first on PATH, so the units' `python3` has Dynamo
    aiperf: str
    model: Path
    etcd: str
    nats: str

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRTD_"))}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        # The frontend caches model cards under $HOME/.cache/dynamo: one HOME per test.
        env["HOME"] = str(home)
        env["SRTD_BINARIES"] = json.dumps({"aiperf": self.aiperf, "etcd": self.etcd, "nats": self.nats})
        return env


def prepared_stack() -> Stack:
    """What the session prepared; fails (never skips) with the reason when a piece is missing."""
    problems = []

    def var(name: str) -> str:
        value = os.environ.get(name, "")
        if not value:
            problems.append(f"{name} is not set (run the tests with `nox -s dynamo`)")
        return value

    stack = Stack(
        bin=Path(var("SRTD_DYNAMO_BIN")),
        aiperf=var("SRTD_DYNAMO_AIPERF"),
        model=Path(var("SRTD_DYNAMO_MODEL")),
        etcd=var("SRTD_DYNAMO_ETCD"),
        nats=var("SRTD_DYNAMO_NATS"),
    )
    if problems:
        pytest.fail("; ".join(problems))
    python = stack.bin / "python3"
    probe = subprocess.run(
        [str(python), "-c", "import dynamo.frontend, dynamo.mocker"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        problems.append(f"{python} cannot import dynamo.frontend / dynamo.mocker: {probe.stderr.strip()[-300:]}")
    for what, path in (("aiperf", stack.aiperf), ("etcd", stack.etcd), ("nats-server", stack.nats)):
        if not os.access(path, os.X_OK):
            problems.append(f"{what}: {path} is not an executable")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if not (stack.model / name).exists():
            problems.append(f"the tiny model has no {stack.model / name} (scripts/make_tiny_model.py)")
    if problems:
        pytest.fail("; ".join(problems))
    return stack


def wait_ports_free(timeout: float = 60.0) -> None:
    """The recipes' fixed ports are free (on a shared machine another job may hold one for a while)."""
    deadline = time.monotonic() + timeout
    while True:
        busy = []
        for port, what in PORTS.items():
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    busy.append(f"port {port} ({what})")
        if not busy:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{', '.join(busy)} in use by another process for {timeout:g} s")
        time.sleep(0.5)


def derive(base: Path, out: Path, **edits: Any) -> Path:
    """A copy of a recipe with sections merged in (`roles={"agg": {...}}` merges into roles.agg)."""
    yaml = YAML()
    data = yaml.load(base.read_text())
    _merge(data, edits)
    with out.open("w") as f:
        yaml.dump(data, f)
    return out


def _merge(into: Any, edits: dict[str, Any]) -> None:
    for key, value in edits.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


@functools.cache
def private_network() -> bool:
    """Whether a job can run in a network namespace of its own (root, util-linux, iproute2).

    The local recipes use fixed ports (etcd 2379, NATS 4222, the frontend 8000); in a
    namespace of its own a test's job cannot collide with anything else on the machine.
    """
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, check=False)
    return probe.returncode == 0


@dataclass
class Job:
    """A running `srtd run`, maybe in a network namespace of its own."""

    proc: subprocess.Popen[str]
    log_dir: Path
    netns: bool

    def http_get(self, path: str) -> Any:
        """GET the frontend (from inside the job's network namespace when it has one) as JSON."""
        if not self.netns:
            return httpx.get(f"{FRONTEND}{path}", timeout=5.0).json()
        code = f"import httpx, sys; sys.stdout.write(httpx.get({FRONTEND + path!r}, timeout=5.0).text)"
        done = subprocess.run(
            ["nsenter", f"--net=/proc/{self.proc.pid}/ns/net", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return json.loads(done.stdout)

    def generate_instances(self) -> list[tuple[str, int]]:
        """(component, instance id) of every `generate` endpoint the frontend's /health lists."""
        body = self.http_get("/health")
        return sorted((i["component"], i["instance_id"]) for i in body["instances"] if i["endpoint"] == "generate")

    def finish(self, timeout: float = 300.0) -> str:
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return out


def start(stack: Stack, recipe: Path, tmp: Path) -> Job:
    """`srtd run RECIPE` with the stack's PATH, a HOME of its own and logs in tmp/logs."""
    (tmp / "home").mkdir(exist_ok=True)
    argv = [*SRTD, "run", str(recipe), "--log-dir", str(tmp / "logs")]
    netns = private_network()
    if netns:
        argv = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', *argv]
    else:
        wait_ports_free()
    proc = subprocess.Popen(
        argv, cwd=tmp, env=stack.env(tmp / "home"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    return Job(proc, tmp / "logs", netns)


def first_pid(events: list[Any], unit: str, attempt: int = 0) -> int:
    pid = next(e.pid for e in events if e.unit == unit and e.state == "starting" and e.attempt == attempt)
    assert pid is not None
    return int(pid)


def aiperf_records(log_dir: Path) -> int:
    """Requests aiperf has recorded so far (it appends one line per finished request)."""
    total = 0
    for path in (log_dir / "aiperf").glob("c*/profile_export.jsonl"):
        total += sum(1 for line in path.read_text().splitlines() if line.strip())
    return total
