from __future__ import annotations

import json

import click

from srtd.cli._main import cli


@cli.command()
def schema() -> None:
    """Print the recipe JSON Schema, generated from srtd's models."""
    from srtd.recipe import recipe_json_schema

    click.echo(json.dumps(recipe_json_schema(), indent=2, sort_keys=False))
