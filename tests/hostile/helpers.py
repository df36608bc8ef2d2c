"""Running srtd on hostile input: in-process through click, or in a bounded subprocess."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

import srtd.cli._commands
from srtd.cli._main import cli
from tests.command import run_srtd

# Exit codes a command may end with on any input (docs/exit-codes.md); 70 is a bug.
DOCUMENTED = {0, 1, 2, 3, 4}
MEMORY = 1 << 30  # RLIMIT_AS of a subprocess: 1 GiB, a recipe needs a few tens of MiB
SECONDS = 20  # RLIMIT_CPU, and the wall-clock timeout beside it

EXAMPLE_JOURNAL = Path(__file__).parent.parent / "attach" / "data" / "example.jsonl"


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def srtd(*args: str, env: dict[str, str] | None = None) -> Result:
    """One command in this process (fast: most property examples go this way)."""
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (SECONDS, SECONDS))


def bounded(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """One command in a subprocess with memory and CPU rlimits and a wall-clock timeout."""
    proc = run_srtd(*args, cwd=cwd, env=env, drop=("SRTD_", "SLURM_"), timeout=SECONDS, preexec_fn=_limits)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def one_line(stderr: str) -> str:
    """The one error line; fails when there is a traceback or more than one line."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if "warning:" not in line]
    assert len(lines) == 1, stderr
    return lines[0]


def tree(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}
