"""How a command's outcome becomes an exit code, without click: the command line's group
(`_main.py`) and the supervisor's own process (`_supervise.py`, which never loads click)
both end this way.

A command returns its code (None: success) or raises.  A known error is said on stderr as
one `srtd: ` line per problem and mapped to its exit code (srtd/errors.py); Ctrl-C is
`srtd: interrupted`; anything else is a bug in srtd, said in one line with its traceback
kept in a file.  Never a traceback on the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from srtd.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, describe, exit_code_for, user_error


def say(line: str) -> None:
    """One line on stderr, at once."""
    print(line, file=sys.stderr, flush=True)


def outcome(
    command: Callable[[], int | None],
    *,
    tell: Callable[[str], None] = say,
    passthrough: tuple[type[BaseException], ...] = (),
) -> int:
    """`command`'s exit code; `passthrough`: errors left to the caller (click's own)."""
    try:
        code = command()
    except passthrough:
        raise
    except KeyboardInterrupt:
        tell("srtd: interrupted")
        return EXIT_INTERRUPTED
    except Exception as err:
        known = user_error(err)
        if known is not None:
            for line in describe(known).splitlines():
                tell(f"srtd: {line}")
            return exit_code_for(known)
        # a bug in srtd: say so in one line, keep the traceback
        import tempfile  # imported here: every command would pay for them
        import traceback

        with tempfile.NamedTemporaryFile("w", prefix="srtd-crash-", suffix=".txt", delete=False) as fh:
            traceback.print_exc(file=fh)
        tell(f"srtd: internal error: {type(err).__name__}: {err} (traceback in {fh.name})")
        return EXIT_INTERNAL
    return EXIT_OK if code is None else int(code)
