"""Ctrl-C at any moment of a command, its imports included: exit 130 (docs/exit-codes.md), one
line, no traceback, nothing left running.

The moments are found, not guessed: the command runs under `python -X importtime`, which
writes a line to stderr as each module is imported, and SIGINT is sent when a given one is.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from srtd.errors import EXIT_INTERRUPTED
from tests.command import REPO, srtd_env
from tests.supervisor.helpers import assert_no_leftovers

pytestmark = pytest.mark.slow

DEMO = REPO / "recipes" / "local" / "demo.yaml"
IMPORTED = "import time:"
# while `srtd.cli` loads (click, the command group), before the arguments are parsed; a command's
# own module loads only when it runs (the lazy table in `srtd/cli/_main.py`)
STARTUP = ("click", "srtd.cli._main")


def interrupted(args: list[str], at: str | float, cwd: Path, **env: str) -> tuple[int, list[str]]:
    """`srtd ARGS` sent SIGINT once module `at` is imported (or `at` seconds after its start):
    its exit code and its stderr, the import lines left out."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "srtd", *args],
        cwd=cwd,
        env=srtd_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said: list[str] = []
    if isinstance(at, str):
        for line in proc.stderr:
            said.append(line)
            if line.startswith(IMPORTED) and line.rstrip().split("|")[-1].strip() == at:
                break
        else:
            raise AssertionError(f"{at} was never imported: {''.join(said)[-2000:]}")
    else:
        time.sleep(at)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    lines = [line for line in [*said, *rest.splitlines(keepends=True)] if not line.startswith(IMPORTED)]
    return proc.returncode, [line.rstrip("\n") for line in lines]


def assert_clean(code: int, stderr: list[str]) -> None:
    text = "\n".join(stderr)
    assert "Traceback" not in text, text
    assert "KeyboardInterrupt" not in text, text
    assert "Aborted" not in text, text  # click's own Ctrl-C, exit 1
    assert code == EXIT_INTERRUPTED, text


@pytest.mark.parametrize("at", [*STARTUP, "srtd.supervisor._watch", 2.0])  # _watch: the supervisor, loaded by `run`
def test_run_interrupted_at_any_moment_stops_cleanly(tmp_path: Path, at: str | float) -> None:
    token = f"srtdtest-{uuid.uuid4().hex}"
    log_dir = tmp_path / "logs"
    args = ["run", str(DEMO), "--local", "--log-dir", str(log_dir), "--job-id", token]
    code, stderr = interrupted(args, at, tmp_path)
    assert_clean(code, stderr)
    if at in STARTUP:  # before the command began: nothing started, one line
        assert stderr == ["srtd: interrupted"]
        assert not log_dir.exists()
    else:  # the job's own stop: journaled, every unit stopped
        journal = (log_dir / "events.jsonl").read_text().splitlines()
        assert '"state":"cancelled"' in journal[-1]
        assert "received SIGINT" in journal[-1]
    assert_no_leftovers(token)


@pytest.mark.parametrize("at", STARTUP)
@pytest.mark.parametrize(
    "args",
    [["plan", str(DEMO), "--local"], ["validate", str(DEMO)], ["ps", "--local"], ["attach", "no-such-job"]],
    ids=["plan", "validate", "ps", "attach"],
)
def test_a_command_interrupted_while_it_starts_says_so_in_one_line(tmp_path: Path, args: list[str], at: str) -> None:
    code, stderr = interrupted(args, at, tmp_path, SRTD_RUNTIME_DIR=str(tmp_path / "rt"))
    assert_clean(code, stderr)
    assert stderr == ["srtd: interrupted"]


def test_the_collector_interrupted_while_it_serves_stops_cleanly(tmp_path: Path) -> None:
    code, stderr = interrupted(["collector", "--port", "0", "--db", str(tmp_path / "c.db")], 3.0, tmp_path)
    assert_clean(code, stderr)


def test_logs_follow_interrupted_while_it_follows_says_so_in_one_line(tmp_path: Path) -> None:
    """`srtd logs -f` of a job whose journal has no end yet follows until Ctrl-C."""
    example = REPO / "tests" / "attach" / "data" / "example.jsonl"
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    journal = "".join(example.read_text().splitlines(keepends=True)[:13])
    # the logs it names inside the log directory, as srtd writes them (`srtd logs` reads no other)
    (log_dir / "events.jsonl").write_text(journal.replace('"/logs/', f'"{log_dir}/'))
    code, stderr = interrupted(["logs", str(log_dir), "etcd", "-f"], 2.0, tmp_path)
    assert_clean(code, stderr)
    assert stderr == ["srtd: interrupted"]
