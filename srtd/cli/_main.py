"""The command group and the one place errors become exit codes."""

from __future__ import annotations

import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from srtd import __version__
from srtd.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, describe, exit_code_for, user_error

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    """Runs every command under the same error policy: one line per problem, no traceback.

    The one place a command's outcome becomes the process's exit status: a command
    returns its code (None for success) or raises; `_outcome` turns either into a code.
    """

    def invoke(self, ctx: click.Context) -> Any:
        ctx.exit(self._outcome(ctx))

    def _outcome(self, ctx: click.Context) -> int:
        try:
            code = super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("srtd: interrupted", err=True)
            return EXIT_INTERRUPTED
        except Exception as err:
            known = user_error(err)
            if known is not None:
                for line in describe(known).splitlines():
                    click.echo(f"srtd: {line}", err=True)
                return exit_code_for(known)
            # a bug in srtd: say so in one line, keep the traceback
            with tempfile.NamedTemporaryFile("w", prefix="srtd-crash-", suffix=".txt", delete=False) as fh:
                traceback.print_exc(file=fh)
            click.echo(f"srtd: internal error: {type(err).__name__}: {err} (traceback in {fh.name})", err=True)
            return EXIT_INTERNAL
        return EXIT_OK if code is None else int(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="srtd")
def cli() -> None:
    """srtd: supervise disaggregated LLM-serving jobs on Slurm, or on this machine.

    Exit codes: 0 success; 1 the job failed; 2 invalid input (recipe, cluster
    settings, plan, command line); 3 the environment refused (launcher, log dir,
    a file that cannot be written);
    4 attach failed; 70 internal error; 128+N stopped by signal N.
    """


def main() -> None:
    from srtd.cli import _commands  # noqa: F401  (registers the commands)

    try:
        cli(standalone_mode=True)
    except BrokenPipeError:  # `srtd plan ... | head`: the reader is gone, nothing to report (exit 0)
        sys.stderr.close()
