"""A real `srtd run` in a subprocess, its socket and its journal."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from srtd.attach._paths import read_pointer
from srtd.events import Event
from srtd.supervisor import read_journal
from srtd.unit import Plan
from tests.command import SRTD
from tests.supervisor.helpers import free_port

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recipes" / "local" / "demo.yaml"
RESTART = REPO / "recipes" / "local" / "restart.yaml"


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return {**base, **extra}


def srtd(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*SRTD, *args],
        cwd=REPO,
        env=env(),
        check=False,
        capture_output=True,
        text=True,
        timeout=kwargs.pop("timeout", 60),
        **kwargs,
    )


def toy_plan(recipe: Path, where: Path) -> Path:
    """RECIPE planned for this machine, every port it uses moved to a free one.

    The toy recipes use fixed ports (the router on 8000); other test runs on the same
    machine use them too, so each test gets its own.
    """
    log_dir = where / "logs"
    job_id = f"t-{uuid.uuid4().hex[:8]}"
    planned = srtd("plan", str(recipe), "--local", "--json", "--log-dir", str(log_dir), "--job-id", job_id)
    assert planned.returncode == 0, planned.stderr
    text = planned.stdout
    ports = {
        arg for unit in json.loads(text)["units"] for flag, arg in itertools.pairwise(unit["argv"]) if flag == "--port"
    }
    for port in ports:
        text = re.sub(rf"(?<![0-9]){port}(?![0-9])", str(free_port()), text)
    path = where / "plan.json"
    path.write_text(text)
    return path


class JobProcess:
    """`srtd run TARGET --log-dir LOG_DIR` with the test's runtime directory."""

    def __init__(self, target: Path, log_dir: Path, **extra_env: str) -> None:
        self.log_dir = log_dir
        # A file, not a pipe: srtd writes a line per event, and a pipe nobody reads
        # would fill up and stall it.
        self.output = log_dir.parent / f"{log_dir.name}.srtd-output"
        self.output.parent.mkdir(parents=True, exist_ok=True)
        with open(self.output, "w") as out:
            self.proc = subprocess.Popen(
                [*SRTD, "run", str(target), "--log-dir", str(log_dir)],
                cwd=REPO,
                env=env(**extra_env),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )

    @classmethod
    def of_toy(cls, recipe: Path, where: Path, **extra_env: str) -> JobProcess:
        return cls(toy_plan(recipe, where), where / "logs", **extra_env)

    @classmethod
    def of_plan(cls, plan: Plan, where: Path, **extra_env: str) -> JobProcess:
        path = where / "plan.json"
        path.write_text(plan.dumps())
        return cls(path, Path(plan.log_dir), **extra_env)

    def socket(self, timeout: float = 30.0) -> Path:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            path = read_pointer(self.log_dir)
            if path is not None and path.exists():
                return path
            if self.proc.poll() is not None:
                raise AssertionError(f"srtd ended early: {self.output.read_text()}")
            time.sleep(0.05)
        raise AssertionError("no attach socket")

    def events(self) -> list[Event]:
        path = self.log_dir / "events.jsonl"
        return read_journal(path) if path.exists() else []

    def wait_for(self, predicate: Callable[[list[Event]], bool], timeout: float = 60.0) -> list[Event]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.events()
            if predicate(seen):
                return seen
            time.sleep(0.05)
        raise AssertionError(f"timed out; journal: {[(e.unit, e.state) for e in self.events()]}")

    def running(self, timeout: float = 60.0) -> list[Event]:
        return self.wait_for(lambda es: any(e.unit is None and e.state == "running" for e in es), timeout)

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self.kill()
        return self.proc.returncode, self.output.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """`srtd ARGS` on a pseudo-terminal of its own (stdin, stdout, stderr), as a person runs it."""

    def __init__(self, *args: str, columns: int = 150) -> None:
        import pty

        self.leader, follower = pty.openpty()
        term = {"COLUMNS": str(columns), "LINES": "60", "TERM": "xterm-256color"}
        self.proc = subprocess.Popen(
            [*SRTD, *args], cwd=REPO, env=env(**term), stdin=follower, stdout=follower, stderr=follower
        )
        os.close(follower)
        self.raw = b""

    @property
    def text(self) -> str:
        """What was written so far, without the escape codes."""
        return ANSI.sub("", self.raw.decode(errors="replace"))

    def read_until(self, seen: Callable[[str], bool], timeout: float = 30.0) -> str:
        """Read until `seen(text)` holds; an `AssertionError` with the screen if it does not within `timeout`."""
        import select

        deadline = time.monotonic() + timeout
        while not seen(self.text):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.leader], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"not seen within {timeout} s; the screen:\n{self.text[-3000:]}")
            try:
                chunk = os.read(self.leader, 65536)
            except OSError:  # EIO: the program closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"the program ended ({self.proc.wait()}); the screen:\n{self.text[-3000:]}")
            self.raw += chunk
        return self.text

    def close(self, wait: float = 0.0) -> int | None:
        """The program's exit code, once it has ended by itself within `wait` seconds, else killed."""
        import contextlib

        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=wait)
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait(timeout=30)
        os.close(self.leader)
        return code
