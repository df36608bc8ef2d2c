"""Run a plan JSON under the real supervisor with the local launcher: `srtd run` in miniature.

    python run_plan.py PLAN.json [--no-guardian] [--no-pdeathsig] [--grace S]

Exits with the supervisor's exit code.  Used by tests that signal or kill srtd itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from srtd.cli import run_program as run
from srtd.launch import LocalLauncher
from srtd.supervisor import TerminalConsole
from srtd.unit import Plan


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("plan")
    p.add_argument("--no-guardian", action="store_true")
    p.add_argument("--no-pdeathsig", action="store_true")
    p.add_argument("--grace", type=float, default=5.0)
    args = p.parse_args()
    plan = Plan.loads(Path(args.plan).read_text())
    launcher = LocalLauncher(guardian=not args.no_guardian, pdeathsig=not args.no_pdeathsig, guardian_grace=args.grace)
    return run(plan, launcher, console=TerminalConsole(sys.stderr, tty=False))


if __name__ == "__main__":
    sys.exit(main())
