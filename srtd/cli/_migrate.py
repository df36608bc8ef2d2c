"""`srtd migrate`: rewrite schema 1 recipes as schema 2."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from srtd.cli._main import cli
from srtd.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_WOULD_CHANGE,
    FileRefused,
    LaunchError,
    Problem,
    RecipeError,
    UsageError,
)

if TYPE_CHECKING:
    from srtd.recipe import Migration


def _write(path: Path, text: str) -> None:
    """Write `path` in one step, or a `LaunchError` naming it (the environment refused, exit 3).

    Only a regular file is replaced: a link, a FIFO or a device at `path` is refused,
    so `-o /dev/null` cannot turn the device into a file, and `--in-place` on a link
    leaves the link and its target alone (docs/security.md).
    """
    from srtd._files import write_target

    if path.is_dir():
        raise LaunchError(f"{path}: is a directory; -o names the file to write")
    try:
        write_target(path, text, error=FileRefused)
    except FileRefused:  # it names the file and why
        raise
    except OSError as err:
        raise LaunchError(f"{path}: cannot write: {err.strerror or err}") from None


def _diff(path: Path, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"{path}", f"{path} (schema 2)"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _to_stdout(
    files: tuple[Path, ...], *, in_place: bool, output: Path | None, check: bool, show_diff: bool, as_json: bool
) -> bool:
    """Refuse options that do not fit together; True when the migration goes to stdout."""
    if in_place and output is not None:
        raise UsageError("choose one of --in-place and -o")
    if check and (in_place or output is not None):
        raise UsageError("--check writes nothing; leave out --in-place and -o")
    if output is not None and len(files) != 1:
        raise UsageError("-o takes one FILE; use --in-place for several")
    to_stdout = not (in_place or output is not None or check or show_diff or as_json)
    if to_stdout and len(files) != 1:
        raise UsageError("several files: use --in-place, --check or --diff (stdout takes one)")
    return to_stdout


def _say(
    path: Path, text: str, result: Migration, written: str | None, *, show_diff: bool, to_stdout: bool, check: bool
) -> None:
    """One file's outcome, for a reader: its notes, its diff or text, what became of it."""
    for note in result.notes:
        click.echo(f"{path}: note: {note}", err=True)
    if show_diff and result.changed:
        click.echo(_diff(path, text, result.text), nl=False)
    if to_stdout:
        click.echo(result.text, nl=False)
    elif check:
        click.echo(f"{path}: {'would change' if result.changed else 'schema 2, nothing to change'}")
    elif written is not None:
        click.echo(f"{path}: migrated to schema 2" + (f", written to {written}" if written != str(path) else ""))
    elif not show_diff:
        click.echo(f"{path}: schema 2, nothing to change")


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--in-place", "-i", "in_place", is_flag=True, help="Rewrite each FILE where it is.")
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Write the one FILE's migration here.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when a file would change (for CI).")
@click.option("--diff", "show_diff", is_flag=True, help="Show the change as a unified diff.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: every file, changed or not, its notes.")
def migrate(
    files: tuple[Path, ...], in_place: bool, output: Path | None, check: bool, show_diff: bool, as_json: bool
) -> int:
    """Rewrite schema 1 recipes (plain, override files, sweeps) as schema 2.

    Comments and key order are kept; a key that moves takes its comment along.
    Without --in-place or -o the result goes to stdout.  Content with no schema 2
    field is kept as comments at the end of the file and named in a note.  A schema 2
    file comes back unchanged.  Exits 0; with --check 1 when a file would change;
    2 when a file cannot be read or parsed.
    """
    from srtd._yaml import read_file
    from srtd.recipe import migrate_text

    to_stdout = _to_stdout(files, in_place=in_place, output=output, check=check, show_diff=show_diff, as_json=as_json)
    report: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in files:
        try:
            text = read_file(path)
            result = migrate_text(text, str(path))
        except RecipeError as err:
            problems.extend(err.problems)
            continue
        written = None
        if output is not None:
            _write(output, result.text)
            written = str(output)
        elif in_place and result.changed:
            _write(path, result.text)
            written = str(path)
        report.append({"file": str(path), "changed": result.changed, "written": written, "notes": list(result.notes)})
        if not as_json:
            _say(path, text, result, written, show_diff=show_diff, to_stdout=to_stdout, check=check)
    if as_json:
        click.echo(json.dumps({"files": report, "problems": [p.as_json() for p in problems]}, indent=2))
    else:
        for problem in problems:
            click.echo(str(problem), err=True)
    if problems:
        return EXIT_INPUT
    if check and any(r["changed"] for r in report):
        return EXIT_WOULD_CHANGE
    return EXIT_OK
