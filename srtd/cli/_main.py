"""The command group and the one place errors become exit codes."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import click

from srtd import __version__, _early_signals
from srtd.cli._outcome import outcome
from srtd.errors import EXIT_INTERRUPTED

F = TypeVar("F", bound=Callable[..., Any])
Command = click.Command


def exit_status(command: Callable[[], int | None]) -> int:
    """The one place an outcome becomes an exit code: `command`'s own (None: success), or
    its error's, said on stderr as one `srtd: ` line per problem, never a traceback.

    Under `srtd.cli.main`, Ctrl-C is only noted while srtd starts (`_early_signals`): one
    noted by now ends the command before it begins; while it runs, Ctrl-C is a
    `KeyboardInterrupt`; once it has ended, noted again, so srtd's last steps out (click's
    own, the interpreter's) are not interrupted halfway, with a traceback or click's `Aborted!`.
    """
    started = _early_signals.noting_interrupts()
    if started:
        if _early_signals.take_interrupt():
            click.echo("srtd: interrupted", err=True)
            return EXIT_INTERRUPTED
        _early_signals.raise_interrupts()
    try:
        return _outcome(command)
    finally:
        if started:
            _early_signals.note_interrupts()


def _echo(line: str) -> None:
    click.echo(line, err=True)


# click's own exits and errors are click's to say (usage errors, --help, Abort)
_CLICKS = (click.exceptions.Exit, click.exceptions.Abort, click.ClickException)
_outcome = partial(outcome, tell=_echo, passthrough=_CLICKS)


# command name -> the module that defines it (and registers it on `cli` when imported)
COMMANDS = {
    **dict.fromkeys(("attach", "logs", "ps", "relay", "restart", "signal", "stop", "tail"), "srtd.cli._attach"),
    "collector": "srtd.cli._collector",
    "migrate": "srtd.cli._migrate",
    "plan": "srtd.cli._plan",
    "results": "srtd.cli._results",
    "run": "srtd.cli._run",
    "schema": "srtd.cli._schema",
    "submit": "srtd.cli._submit",
    "sweep": "srtd.cli._sweep",
    "timeline": "srtd.cli._timeline",
    "validate": "srtd.cli._validate",
}


class _Group(click.Group):
    """Runs every command under the same error policy (`exit_status`): a command returns
    its code or raises, and only here does that become the process's exit status.

    A command's module is imported when the command is looked up (`COMMANDS`): `srtd ps`
    loads the attach client, not the recipe models `srtd validate` needs.  `--help`
    looks every command up, so it lists each with its short help as before."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            importlib.import_module(module)  # its `@cli.command()` registers it
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        if args and args[0] not in COMMANDS:  # an unknown name: click's "Did you mean" looks at every command
            for module in sorted(set(COMMANDS.values())):
                importlib.import_module(module)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        ctx.exit(exit_status(partial(super().invoke, ctx)))


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
    try:
        cli(standalone_mode=True)
    except BrokenPipeError:  # `srtd plan ... | head`: the reader is gone, nothing to report (exit 0)
        sys.stderr.close()
