"""The `srtd` command line.  Thin: each command parses, calls the library, renders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from srtd.cli._main import exit_status, main

if TYPE_CHECKING:
    from srtd.launch import Launcher
    from srtd.unit import Plan


def run_program(plan: Plan, launcher: Launcher, **options: Any) -> int:
    """`srtd.supervisor.run` for a program of its own: the exit code, and an error said
    as `srtd run` says it (one `srtd: ` line per problem, mapped to its exit code)."""
    from srtd.supervisor import run

    return exit_status(lambda: run(plan, launcher, **options))


__all__ = ["exit_status", "main", "run_program"]
