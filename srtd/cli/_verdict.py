"""One verdict for `srtd plan`, `srtd run` and `srtd validate`: the same refusals, the same warnings.

The plan builder reports a mistake in a recipe key by its field path only (it reads
no files); here each one is pinned to the key's file:line:col through the loader's
position map, so a plan-time refusal reads exactly like a load-time one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from srtd.errors import InputError, PlanError, Problem, RecipeError, grouped

if TYPE_CHECKING:
    from srtd.cluster import Cluster
    from srtd.recipe import LoadedRecipe
    from srtd.unit import Plan


def located_plan(loaded: LoadedRecipe, cluster: Cluster, **options: Any) -> Plan:
    """`build_plan`, with every refusal a `RecipeError` pointing at the recipe key it comes from."""
    from srtd.benchmarks import missing_script
    from srtd.plan import build_plan

    try:
        plan = build_plan(loaded, cluster, **options)
    except PlanError as err:
        raise RecipeError([loaded.locate(p) for p in err.problems]) from None
    missing = missing_script(loaded.recipe.benchmark.type, cluster.benchmark_scripts)
    if missing is not None:
        raise RecipeError([loaded.locate(missing)])
    return plan


def verdict(loaded: LoadedRecipe, cluster: Cluster) -> tuple[list[Problem], list[Problem]]:
    """(problems, warnings) of one recipe, planned as `srtd plan --slurm` would, on a synthetic allocation.

    The sbatch wrapper is rendered too: what `srtd plan --sbatch` would refuse is refused here.
    """
    from srtd.plan import sbatch_script

    try:
        plan = located_plan(loaded, cluster)
        if plan.sbatch is not None:
            sbatch_script(plan, [loaded.file])
    except PlanError as err:
        return [loaded.locate(p) for p in err.problems], []
    except RecipeError as err:
        return list(err.problems), []
    except InputError as err:  # pragma: no cover - every plan-time refusal is a PlanError today
        return [Problem(str(err), file=loaded.file, variant=loaded.variant)], []
    return [], plan_warnings(loaded, plan)


def plan_warnings(loaded: LoadedRecipe, plan: Plan) -> list[Problem]:
    return [Problem(f"warning: {w}", file=loaded.file, variant=loaded.variant) for w in plan.warnings]


def echo_warnings(warnings: list[Problem]) -> None:
    """Warnings go to stderr, one line each, the same from every command."""
    for warning in grouped(warnings):
        click.echo(str(warning), err=True)
