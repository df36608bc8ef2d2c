from __future__ import annotations

import json
from pathlib import Path

import click

from srtd.cli._main import cli
from srtd.errors import EXIT_INPUT, EXIT_OK, Problem, RecipeError


def check_file(path: Path) -> tuple[int, list[Problem]]:
    """Load every recipe of a file and run every check; (recipes, problems)."""
    from srtd.plan import check_recipe
    from srtd.recipe import load_recipes

    try:
        loaded = load_recipes(path)
    except RecipeError as err:
        return 0, list(err.problems)
    problems: list[Problem] = []
    for recipe in loaded:
        problems.extend(check_recipe(recipe))
    return len(loaded), problems


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every file's verdict.")
def validate(recipes: tuple[Path, ...], as_json: bool) -> None:
    """Check recipe files: every problem, one line each, with file:line:col.

    Exits 0 when every file is valid, 2 otherwise.
    """
    report = []
    failed = False
    for path in recipes:
        count, problems = check_file(path)
        failed = failed or bool(problems)
        report.append({"file": str(path), "valid": not problems, "recipes": count, "problems": problems})
    if as_json:
        doc = [{**r, "problems": [p.as_json() for p in r["problems"]]} for r in report]  # type: ignore[attr-defined]
        click.echo(json.dumps(doc, indent=2))
    else:
        for r in report:
            if r["problems"]:
                for problem in r["problems"]:  # type: ignore[attr-defined]
                    click.echo(str(problem), err=True)
            else:
                n = r["recipes"]
                click.echo(f"{r['file']}: valid ({n} recipe{'s' if n != 1 else ''})")
    raise SystemExit(EXIT_INPUT if failed else EXIT_OK)
