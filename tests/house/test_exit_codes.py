"""Exit codes have one owner (docs/exit-codes.md): `srtd/errors.py` names them, and the
`srtd` command group alone turns an outcome into the process's exit status."""

from __future__ import annotations

import io
import itertools
import tokenize
from pathlib import Path

SRTD = Path(__file__).resolve().parents[2] / "srtd"

# Programs of their own (each a console script or `python -m` target): their `main`
# exits with what it ran, and none of them is the `srtd` command.
PROGRAM_MAINS = {
    "benchmarks/aiperf.py",
    # `srtd run`'s own supervisor, which the command execs (docs/supervisor.md, the handover):
    # it ends through the group's policy (`srtd.cli._outcome.outcome`), without click
    "cli/_supervise.py",
    "engines/_nsys_window.py",  # run with python3 inside the job's containers (docs/engines.md)
    "launch/_guardian.py",
    "launch/_node_check.py",  # run by its path with -I -S on every node before launch (docs/nodes.md)
    "toy/_proc.py",
    "toy/bench.py",
    "toy/gpus.py",
    "toy/router.py",
    "toy/worker.py",
}
# Where 128 is not an exit code: the bound of a signal number in an event.
NOT_EXIT_CODES = {"events.py", "status_api.py"}  # an event's signal: at most 128
EXITS = {"SystemExit", "_exit"}  # `raise SystemExit(...)`, `os._exit(...)`


def _tokens(path: Path) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))


def _exit_points(path: Path) -> list[str]:
    tokens = [t for t in _tokens(path) if t.type in (tokenize.NAME, tokenize.OP)]
    found = []
    for (before, token), (_, after) in itertools.pairwise(itertools.pairwise(tokens)):
        called = before.string == "." and token.string == "exit" and after.string == "("  # sys.exit(, ctx.exit(
        if token.string in EXITS or called:
            found.append(f"{path.relative_to(SRTD)}:{token.start[0]}: {token.line.strip()}")
    return found


def test_the_command_group_is_the_only_exit_point_of_srtd() -> None:
    found = [
        point
        for path in sorted(SRTD.rglob("*.py"))
        if str(path.relative_to(SRTD)) not in PROGRAM_MAINS
        for point in _exit_points(path)
    ]
    assert len(found) == 1, "\n".join(found)
    assert found[0].startswith("cli/_main.py:")
    assert "ctx.exit(exit_status(" in found[0]


def test_no_exit_code_is_a_literal_outside_the_table() -> None:
    """128 + N and 130 are `EXIT_SIGNAL_BASE`, `exit_for_signal` and `EXIT_INTERRUPTED`."""
    found = [
        f"{path.relative_to(SRTD)}:{t.start[0]}: {t.line.strip()}"
        for path in sorted(SRTD.rglob("*.py"))
        if path.name != "errors.py" and str(path.relative_to(SRTD)) not in NOT_EXIT_CODES
        for t in _tokens(path)
        if t.type == tokenize.NUMBER and t.string in ("128", "130")
    ]
    assert found == []
