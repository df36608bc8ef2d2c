from __future__ import annotations

import click

from srtd import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="srtd")
def cli() -> None:
    """srtd: supervise disaggregated LLM-serving jobs on Slurm, or on this machine."""


def main() -> None:
    cli()
