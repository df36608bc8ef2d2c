from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from srtd.cli._main import cli
from srtd.cli._verdict import echo_warnings, verdict
from srtd.errors import EXIT_INPUT, EXIT_OK, Problem, RecipeError, grouped

if TYPE_CHECKING:
    from srtd.cluster import Cluster


def check_file(path: Path, cluster: Cluster) -> tuple[int, list[Problem], list[Problem]]:
    """Load every recipe of a file and refuse what `srtd plan` would: (recipes, problems, warnings).

    Each recipe is planned on a synthetic allocation of its own size, so every
    plan-time rule runs with no allocation at hand.
    """
    from srtd.recipe import load_recipes

    try:
        loaded = load_recipes(path)
    except RecipeError as err:
        return 0, list(err.problems), []
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for recipe in loaded:
        found, noted = verdict(recipe, cluster)
        problems.extend(found)
        warnings.extend(noted)
    return len(loaded), problems, warnings


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--cluster-config", type=click.Path(path_type=Path), help="srtslurm.yaml to read (as `srtd plan`).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every file's verdict.")
def validate(recipes: tuple[Path, ...], cluster_config: Path | None, as_json: bool) -> int:
    """Check recipe files: every problem, one line each, with file:line:col.

    Refuses everything `srtd plan` refuses, for every variant of a file, planning
    each on a synthetic allocation of the recipe's own size.  Exits 0 when every
    file is valid, 2 otherwise.
    """
    from srtd.cluster import load_cluster

    cluster, _ = load_cluster(cluster_config)
    report: list[dict[str, Any]] = []
    for path in recipes:
        count, problems, warnings = check_file(path, cluster)
        report.append(
            {"file": str(path), "valid": not problems, "recipes": count, "problems": problems, "warnings": warnings}
        )
    failed = any(r["problems"] for r in report)
    if as_json:
        doc = [
            {**r, "problems": [p.as_json() for p in r["problems"]], "warnings": [w.as_json() for w in r["warnings"]]}
            for r in report
        ]
        click.echo(json.dumps(doc, indent=2))
    else:
        for r in report:
            echo_warnings(r["warnings"])
            if r["problems"]:
                for problem in grouped(r["problems"]):
                    click.echo(str(problem), err=True)
            else:
                n = r["recipes"]
                click.echo(f"{r['file']}: valid ({n} recipe{'s' if n != 1 else ''})")
    return EXIT_INPUT if failed else EXIT_OK
