"""`srtd collector`: the status collector and its dashboard (docs/collector.md).

Its dependencies (starlette, uvicorn) are the `collector` extra, imported only here,
inside the command: no other command pays for them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from srtd.cli._main import cli
from srtd.errors import EXIT_OK, LaunchError, exit_for_signal


def _need_extra() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise LaunchError(f"srtd collector needs {err.name or 'its extra'}: pip install 'srtd[collector]'") from None


@cli.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default="srtd-collector.db",
    show_default=True,
    help="The SQLite file (created on first start, migrated on every start).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; beyond loopback a write token is required.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Say where it listens as one JSON line.")
@click.option(
    "--demo", is_flag=True, help="Also run a few local toy jobs reporting to it (a sweep, a failure): a populated page."
)
def collector(db_path: Path, host: str, port: int, as_json: bool, demo: bool) -> int:
    """Collect the status of jobs (srtd's and srtctl's reporters) and show them at http://HOST:PORT/.

    Writes need $SRTD_COLLECTOR_TOKEN as a bearer token when it is set; reads (the
    API and the dashboard) need $SRTD_COLLECTOR_READ_TOKEN, or the write token, when
    that is set.  Without a write token it listens on loopback only.
    """
    _need_extra()
    from srtd.collector import PAGE_ROUTES as ROUTES
    from srtd.collector import READ_TOKEN_ENV, Tokens, serve

    tokens = Tokens.from_env(os.environ)

    def ready(url: str) -> None:
        if as_json:
            click.echo(json.dumps({"url": url, "db": str(db_path), "read_token": tokens.read is not None}))
            return
        click.echo(f"srtd collector: {url}/ (database {db_path})", err=True)
        if tokens.read is None and tokens.write is not None:
            click.echo(f"srtd collector: reads are open; set {READ_TOKEN_ENV} to protect them", err=True)

    beside = None
    if demo:
        from srtd.collector import fill_demo as fill

        def say(line: str) -> None:
            click.echo(line, err=True)

        workdir = db_path.with_name(db_path.name + ".demo")

        async def beside(url: str) -> None:
            await fill(url, workdir, tokens.write, say)

    stopped_by = serve(db_path, host, port, tokens, routes=ROUTES, ready=ready, beside=beside)
    return EXIT_OK if stopped_by is None else exit_for_signal(stopped_by)  # Ctrl-C: 130, as every command
