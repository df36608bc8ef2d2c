"""Every error srtd raises on purpose, and the exit code each one maps to.

The hierarchy is at the top; the mapping to exit codes is `exit_code_for`, the one
place the CLI consults.  Anything that is not an `SrtdError` escaping to the CLI is
a bug in srtd and exits with `EXIT_INTERNAL`.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Sequence
from dataclasses import replace

from srtd._value import value_class

# Exit codes: documented in docs/exit-codes.md, and nowhere else decided.
EXIT_OK = 0
EXIT_JOB_FAILED = 1  # a critical unit failed, or a terminal unit exited non-zero (its code wins)
EXIT_WOULD_CHANGE = EXIT_JOB_FAILED  # `srtd migrate --check`: a file is not schema 2 yet, as linters say
EXIT_INPUT = 2  # recipe, cluster file, plan or command line is invalid; nothing was started
EXIT_LAUNCH = 3  # the environment refused: a launcher could not start, the log dir is not writable
EXIT_ATTACH = 4  # no such job to attach to, or its socket refused us
EXIT_NO_RESULTS = 5  # the benchmark exited 0 but measured nothing (the results gate, docs/results.md)
EXIT_PUBLISH = 6  # the job succeeded but a result publisher failed or timed out (docs/results.md)
EXIT_POWER = 7  # telemetry.required: the job's power samples do not cover its measurement windows
EXIT_SWEEP_UNMEASURED = 1  # `srtd sweep`: a point did not measure validly (failed, timed out, out of retries)
EXIT_PREFLIGHT = 8  # a node failed its preflight check and no spare node was left to take its place (docs/nodes.md)
EXIT_INTERNAL = 70  # a bug in srtd (EX_SOFTWARE); the traceback is saved, not printed
EXIT_SIGNAL_BASE = 128  # stopped by signal N: 128 + N, as shells report it
EXIT_INTERRUPTED = EXIT_SIGNAL_BASE + signal.SIGINT  # Ctrl-C outside a job's own signal handling (130)


def exit_for_signal(signum: int) -> int:
    """The exit code of a process stopped by signal `signum`, as a shell reports it."""
    return EXIT_SIGNAL_BASE + signum


SHOWN_VARIANT = 100  # characters of a variant's name in a message


@value_class(slots=True)
class Problem:
    """One thing wrong with an input file, pinned to where it is."""

    message: str
    path: str = ""  # dotted field path, e.g. roles.decode.gpus
    file: str | None = None
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    variant: str | None = None  # override variant or sweep combination
    more: int = 0  # further variants with this same problem (`grouped`)

    def location(self) -> str:
        parts = [self.file or "<recipe>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        where = self.location()
        if self.variant:
            more = f" and {self.more} more recipes" if self.more else ""
            where += f" [{_short(self.variant)}{more}]"
        if self.path:
            return printable(f"{where} {self.path}: {self.message}")
        return printable(f"{where}: {self.message}")

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "variant": self.variant,
            "message": self.message,
        }


def grouped(problems: Iterable[Problem]) -> list[Problem]:
    """One problem per place and message: the same mistake in every recipe of a sweep is said once.

    The first recipe's name stands for the others, with their count: 1024 recipes of
    a sweep that share a broken base print one line, not 1024.
    """
    groups: dict[tuple[object, ...], list[Problem]] = {}
    for problem in problems:
        key = (problem.file, problem.line, problem.column, problem.path, problem.message)
        groups.setdefault(key, []).append(problem)
    out = []
    for same in groups.values():
        first = same[0]
        variants = list(dict.fromkeys(p.variant for p in same))
        if len(variants) > 1 and first.variant is not None:
            first = replace(first, more=len(variants) - 1)
        out.append(first)
    return out


def _short(variant: str) -> str:
    # a sweep names its recipes by their values, which may be long strings
    return variant if len(variant) <= SHOWN_VARIANT else variant[: SHOWN_VARIANT - 3] + "..."


# C0 and C1 controls, and the line and paragraph separators: each ends a line for someone
# (str.splitlines ends one at U+0085, U+2028 and U+2029 too).
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]} | {
    ord("\n"): "\\n",
    ord("\t"): "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def printable(text: str) -> str:
    """One line whatever a file's keys hold: control characters shown escaped, as repr() does."""
    return text.translate(_CONTROL)


class SrtdError(Exception):
    """Base of every error srtd raises deliberately."""


class InputError(SrtdError):
    """The user's input is wrong; nothing has been started."""


class RecipeError(InputError):
    """A recipe failed to load or validate.  Carries every problem found in the file."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in grouped(self.problems)))

    @classmethod
    def single(cls, message: str, **where: object) -> RecipeError:
        return cls([Problem(message, **where)])  # type: ignore[arg-type]


class ClusterConfigError(InputError):
    """The cluster settings file (srtslurm.yaml) or an SRTD_* variable is invalid."""


class PlanError(InputError):
    """The recipe is valid on its own but cannot be turned into a plan for these nodes.

    Each mistake is a `Problem`; one that comes from a recipe key carries its field
    path (`services.2.after.0`) but no file position: the plan layer reads no files,
    so whoever holds the loader's position map (`LoadedRecipe.locate`) pins it to a line.
    """

    def __init__(self, messages: str | Problem | Iterable[str | Problem]) -> None:
        items = (messages,) if isinstance(messages, str | Problem) else tuple(messages)
        self.problems: tuple[Problem, ...] = tuple(m if isinstance(m, Problem) else Problem(m) for m in items)
        self.messages = tuple(p.message for p in self.problems)
        super().__init__("\n".join(self.messages))


class UsageError(InputError):
    """The command line asks for something that does not fit together."""


class LaunchError(SrtdError):
    """A launcher could not start a unit, or the job's environment is unusable."""


class FileRefused(LaunchError, OSError):
    """A name srtd was to write is a link, a FIFO or a device (docs/security.md): refused.

    An `OSError` too, so that a best-effort write (the post-mortem, a manifest) that
    tolerates a full disk tolerates this the same way; exit 3 where it reaches the user.
    """


class JobRefused(LaunchError):
    """sbatch answered and refused the job (a bad partition, an account, a limit): exit 3."""


class SlurmUnreached(LaunchError):
    """sbatch never got slurmctld's answer (Slurm's communication error or the tool's timeout).

    Nothing was submitted; `srtd sweep` asks again on its next pass, `srtd submit` exits 3.
    """


class AttachError(SrtdError):
    """No running job to attach to, or the job refused the connection."""


class ControlError(AttachError):
    """A running job refused a control verb (unknown unit, nothing running to restart)."""


_EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (InputError, EXIT_INPUT),
    (LaunchError, EXIT_LAUNCH),
    (AttachError, EXIT_ATTACH),
    (SrtdError, EXIT_JOB_FAILED),
    # The machine refused a read or a write srtd was asked to do: permission, a missing
    # directory, a full disk, a directory where a file should be.  Not a bug in srtd.
    (OSError, EXIT_LAUNCH),
)


def user_error(error: BaseException) -> BaseException | None:
    """The error to report when `error` is one a user can act on (an `SrtdError`, an `OSError`).

    A task group wraps what its tasks raise; a group of such errors is reported by its first.
    """
    if isinstance(error, SrtdError | OSError):
        return error
    if isinstance(error, BaseExceptionGroup):
        leaves = [user_error(e) for e in error.exceptions]
        if leaves and all(leaf is not None for leaf in leaves):
            return leaves[0]
    return None


def describe(error: BaseException) -> str:
    """The one-line (per problem) text of a user error."""
    if isinstance(error, OSError) and not isinstance(error, SrtdError):
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    return str(error) or type(error).__name__


def exit_code_for(error: BaseException) -> int:
    """The process exit code for an error that reached the command line."""
    for kind, code in _EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_INTERNAL
