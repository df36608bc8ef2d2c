"""Log patterns (fatal lines, log readiness and heartbeat probes), matched in linear time.

Every such pattern is searched against each line a unit writes, on the job's own task.
Python's `re` backtracks: `(a+)+$` against a line of `a`s ending in `b` takes time
exponential in the line, and while it runs the job's task never gets back to its
signals, so srtd ignores SIGTERM and SIGINT.  RE2 (`google-re2`) matches in time linear
in the line whatever the pattern, and lines are bounded (`supervisor._tail.MAX_PARTIAL`),
so no pattern can hold the job.  What RE2 cannot match that way (backreferences,
lookaround) it refuses when the pattern is compiled: a recipe is refused at load with the
pattern's place in the file (docs/recipe.md#log-patterns).
"""

from __future__ import annotations

from functools import cache
from typing import Any, Protocol

# RE2 loads on the first pattern compiled (its module and libstdc++ are 2.5 MiB of a
# running job's memory): a job whose units watch no log line never loads it.


@cache
def _re2() -> tuple[Any, Any]:
    """The re2 module and its options (RE2 would print its own complaint on stderr; we say it in one line)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    return re2, options


class LogPattern(Protocol):
    def search(self, text: str) -> object | None: ...


def compile_log_pattern(pattern: str) -> LogPattern:
    """A compiled pattern; ValueError (with RE2's reason) for one RE2 refuses."""
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)  # type: ignore[no-any-return]
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(reason) from None


def log_pattern_error(pattern: str) -> str | None:
    """Why `pattern` cannot be a log pattern, or None when it can."""
    try:
        compile_log_pattern(pattern)
    except ValueError as e:
        return str(e)
    return None
