"""The `srtd` command line.  Thin: each command parses, calls the library, renders.

Importing this package loads nothing but `signal` (not even `typing`; `os` and `sys` the
interpreter has loaded before it runs anything): `main` notes Ctrl-C
(`srtd._early_signals`) before it imports click and the commands, and whatever is imported
before that is a moment when a Ctrl-C would still be Python's `KeyboardInterrupt`.
"""

from __future__ import annotations

import os
import sys

from srtd import _early_signals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from srtd.cli._main import exit_status
    from srtd.launch import Launcher
    from srtd.unit import Plan


class Process:
    """`owned` once `main` runs: the command is the process.  Invoked otherwise (click's
    CliRunner, `cli.main(...)` from a program), `srtd run` supervises in the caller's
    process and never execs."""

    owned = False


def main() -> None:
    """The `srtd` command.  A Ctrl-C while it imports is noted, and said once the command group
    is there to say it (`exit_status`), instead of a `KeyboardInterrupt` traceback from the
    middle of an import."""
    _early_signals.note_interrupts()
    Process.owned = True  # `srtd run` may exec its supervisor in this process (`_supervise.py`)
    plan = saved_plan_alone(sys.argv[1:])
    if plan is not None:
        from srtd import _gc

        _gc.pause()  # the job's process starts: resumed once its imports and plan are in
        from srtd.cli._supervise import run_saved_plan_here

        run_saved_plan_here(plan)
    from srtd.cli._main import main as command_line

    command_line()


def saved_plan_alone(args: list[str]) -> str | None:
    """PLAN when the command line is `srtd run PLAN.json` and nothing else, outside a Slurm
    allocation: a job whose every choice is the command's default, supervised at once
    without click (`run_saved_plan_here`).  Whatever else is asked goes through the command
    line; so does an allocation's job, which reads the cluster's settings (`srtd run`)."""
    if len(args) != 2 or args[0] != "run" or args[1].startswith("-") or os.environ.get("SLURM_JOB_ID"):
        return None
    return args[1] if is_saved_plan(args[1]) else None


def is_saved_plan(path: str) -> bool:
    """What `srtd run` takes for a plan saved by `srtd plan --json` rather than a recipe."""
    return os.path.splitext(path.rstrip("/"))[1] == ".json"


def run_program(plan: Plan, launcher: Launcher, **options: Any) -> int:
    """`srtd.supervisor.run` for a program of its own: the exit code, and an error said
    as `srtd run` says it (one `srtd: ` line per problem, mapped to its exit code)."""
    from srtd.cli._outcome import outcome  # the command line's policy, without click
    from srtd.supervisor import run

    return outcome(lambda: run(plan, launcher, **options))


def __getattr__(name: str) -> Any:
    if name == "exit_status":  # on first use: it loads click
        from srtd.cli._main import exit_status

        return exit_status
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["exit_status", "is_saved_plan", "main", "run_program", "saved_plan_alone"]
