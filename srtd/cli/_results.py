"""`srtd results LOG_DIR...`: what the benchmarks of one or many jobs measured, in one table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from srtd.cli._main import cli
from srtd.errors import UsageError

if TYPE_CHECKING:
    from srtd.results import Results


def load_results(log_dir: Path) -> Results:
    from pydantic import ValidationError

    from srtd._files import OUTPUT_LIMIT, read_text_back
    from srtd.results import RESULTS_NAME, Results

    path = log_dir / RESULTS_NAME if log_dir.is_dir() else log_dir
    try:  # a regular file of at most 16 MiB, UTF-8: never a FIFO's block or /dev/zero's endless read
        text = read_text_back(path, limit=OUTPUT_LIMIT, error=UsageError)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror} (was its benchmark read by srtd?)") from None
    try:
        return Results.model_validate_json(text)
    except ValidationError as e:
        first = str(e).splitlines()[0]
        raise UsageError(f"{path}: not a results.json written by srtd ({first})") from None


def _expanded(paths: tuple[Path, ...]) -> list[Path]:
    """Each path as given, but an `srtd sweep` campaign directory as its points' measured jobs."""
    from srtd.sweep import MANIFEST_NAME, measured_log_dirs

    out: list[Path] = []
    for path in paths:
        if path.is_dir() and (path / MANIFEST_NAME).exists() and not (path / "results.json").exists():
            found = measured_log_dirs(path)
            if not found:
                raise UsageError(f"{path}: campaign with no measured point yet")
            out.extend(found)
        else:
            out.append(path)
    return out


@cli.command()
@click.argument("log_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Every row as JSON (one object with a `rows` list).")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write throughput per GPU vs median TPOT and vs concurrency (.png or .svg; needs srtd[plots]).",
)
def results(log_dirs: tuple[Path, ...], as_json: bool, plot: Path | None) -> None:
    """One table of every point the jobs in LOG_DIRS measured (their results.json), sorted
    by the sweep's values and concurrency; a sweep's parameters are columns.  A campaign
    directory of `srtd sweep` stands for the measured job of each of its points."""
    from srtd.results import render, rows_of

    loaded = [load_results(d) for d in _expanded(log_dirs)]
    rows = rows_of(loaded)
    if plot is not None:
        from srtd.results import plot as draw

        draw(rows, plot)
    if as_json:
        document = {"format": 1, "rows": [r.as_json() for r in rows], "plot": str(plot) if plot else None}
        click.echo(json.dumps(document, indent=2))
        return
    failed = [r for r in loaded if not r.verdict.ok]
    click.echo(render(rows, title=f"{len(rows)} points from {len(loaded)} jobs"), nl=False)
    for r in failed:
        click.echo(f"{r.job_id}: {r.verdict.reason}")
    for r in loaded:
        if r.replacement is not None:
            click.echo(f"{r.job_id}: {r.replacement.describe()}")
    if plot is not None:
        click.echo(f"plot written to {plot}")
