"""`srtd timeline LOG_DIR`: the startup analysis of a job from its journal."""

from __future__ import annotations

import json
from pathlib import Path

import click

from srtd.cli._attach import console, journal_of
from srtd.cli._main import cli
from srtd.errors import AttachError, FileRefused, LaunchError


@cli.command()
@click.argument("log_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The timeline as one JSON object.")
@click.option("--no-svg", is_flag=True, help="Do not write LOG_DIR/timeline.svg.")
def timeline(log_dir: Path, as_json: bool, no_svg: bool) -> None:
    """What made the job in LOG_DIR slow to start, and how it went down.

    The critical chain (which unit waited on which, and for how long), time to ready
    per unit, restarts, the teardown by tier, and a Gantt of every unit's states, also
    written as LOG_DIR/timeline.svg.
    """
    from srtd.attach import SVG_NAME, build_timeline, gantt_width, render_timeline, write_svg

    events = journal_of(log_dir)
    if not events:
        raise AttachError(f"{log_dir / 'events.jsonl'}: the journal is empty")
    line = build_timeline(events)
    svg = None
    if not no_svg:
        try:
            svg = write_svg(line, log_dir / SVG_NAME)
        except FileRefused:  # a link or FIFO planted at its name: it names the file and why (exit 3)
            raise
        except OSError as e:  # the environment refused (exit 3), as for every file srtd writes
            raise LaunchError(f"cannot write {log_dir / SVG_NAME}: {e.strerror}") from None
    if as_json:
        click.echo(json.dumps({**line.as_json(), "svg": str(svg) if svg else None}))
        return
    out = console()
    out.print(render_timeline(line, width=gantt_width(out.width)))
    if svg is not None:
        out.print(f"written: {svg}")
