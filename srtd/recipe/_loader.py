"""Loading a recipe file: YAML -> variants -> validated, frozen `Recipe`s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from srtd._value import value_class
from srtd._yaml import PathKey, Positions, parse_text, read_file
from srtd.errors import Problem, RecipeError
from srtd.recipe._errors import problems_from
from srtd.recipe._recipe import Recipe
from srtd.recipe._variants import (
    MAX_VARIANTS,
    SHOWN_NAMES,
    Variant,
    expand_overrides,
    expand_sweep,
    is_override_file,
    no_match,
    sweep_size,
    variant_names,
)


def _v1_hint(file: str | None) -> str:
    return (
        "a schema 1 (pre-2.0) recipe, or a recipe without `schema: 2`; add `schema: 2` if it already uses "
        f"`roles:`, otherwise convert it with `srtd migrate {file or 'FILE'}`"
    )


@value_class
class LoadedRecipe:
    """A validated recipe and where it came from, so later checks can point at lines too."""

    recipe: Recipe
    file: str
    variant: str | None
    positions: Positions

    def problem(self, message: str, path: PathKey | str, *, prefer_key: bool = True) -> Problem:
        key: PathKey = tuple(_split(path)) if isinstance(path, str) else path
        return self.positions.problem(message, key, prefer_key=prefer_key, variant=self.variant)

    def locate(self, problem: Problem) -> Problem:
        """A problem found later (by the plan builder) pinned to this recipe's file and line.

        One with a field path gets the line and column of that key; one without
        names the file (and variant) only.
        """
        if problem.file is not None:
            return problem
        if problem.path:
            return self.problem(problem.message, problem.path)
        return Problem(problem.message, file=self.file, variant=self.variant)


def _split(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in path.split(".") if p]


def load_recipes(path: str | Path, *, variant: str | None = None) -> list[LoadedRecipe]:
    """Every recipe of a file (override variants and sweep combinations expanded).

    Raises `RecipeError` with every problem of every variant.  Never writes the file.
    """
    file = Path(path)
    return load_text(read_file(file), str(file), variant=variant)


def load_recipe(path: str | Path, *, variant: str | None = None) -> LoadedRecipe:
    """Exactly one recipe: a plain file, or one selected variant."""
    loaded = load_recipes(path, variant=variant)
    if len(loaded) > 1:
        names = ", ".join(r.variant or "?" for r in loaded)
        raise RecipeError(
            [
                Problem(
                    f"the file holds {len(loaded)} recipes; choose one with --variant ({names})",
                    file=str(path),
                )
            ]
        )
    return loaded[0]


def load_text(text: str, file: str = "<recipe>", *, variant: str | None = None) -> list[LoadedRecipe]:
    data, positions = parse_text(text, file)
    _check_document(data, positions)
    if is_override_file(data):
        variants = expand_overrides(data, positions)
    else:
        variants = [Variant(None, data, positions)]
    variants = _chosen(variants, variant, file)
    loaded: list[LoadedRecipe] = []
    problems: list[Problem] = []
    for v in variants:
        try:
            loaded.append(_validate(v, file))
        except RecipeError as err:
            problems.extend(err.problems)
    if problems:
        raise RecipeError(problems)
    return loaded


def _chosen(variants: list[Variant], pattern: str | None, file: str) -> list[Variant]:
    """The recipes `--variant` names (all without it), counted before any is built."""
    total = sum(sweep_size(v) for v in variants)
    if pattern is None and total > MAX_VARIANTS and len(variants) > 1:
        message = f"the file makes {total} recipes (variants times sweep combinations), more than {MAX_VARIANTS}"
        raise RecipeError([Problem(message, file=file, line=1)])
    chosen = [s for v in variants for s in expand_sweep(v, pattern)]
    if pattern is not None and not chosen:
        some = [name for v in variants[:SHOWN_NAMES] for name in variant_names(v, SHOWN_NAMES)]
        raise RecipeError([no_match(pattern, some, total, file)])
    return chosen


def _check_document(data: Any, positions: Positions) -> None:
    file = positions.file
    if data is None or data == "":
        raise RecipeError([Problem("the file is empty; a recipe is a YAML mapping", file=file, line=1)])
    if isinstance(data, list):
        raise RecipeError([Problem("the top level is a list; a recipe is a YAML mapping", file=file, line=1)])
    if not isinstance(data, dict):
        raise RecipeError(
            [Problem(f"the top level is a {type(data).__name__}; a recipe is a YAML mapping", file=file, line=1)]
        )
    schema = data.get("schema")
    if schema is None and isinstance(data.get("base"), dict):
        schema = data["base"].get("schema")
    if schema is None:
        raise RecipeError([Problem(f"missing `schema: 2`: {_v1_hint(file)}", file=file, line=1, column=1)])
    if schema != 2:
        where = positions.values.get(("schema",)) or positions.values.get(("base", "schema"))
        raise RecipeError(
            [
                Problem(
                    f"schema must be 2, got {schema!r}: {_v1_hint(file)}",
                    path="schema",
                    file=file,
                    line=where[0] if where else 1,
                    column=where[1] if where else 1,
                )
            ]
        )


def _freeze(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _freeze(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return tuple(_freeze(v) for v in data)
    return data


def _validate(variant: Variant, file: str) -> LoadedRecipe:
    try:
        recipe = Recipe.model_validate(_freeze(variant.data))
    except ValidationError as err:
        raise RecipeError(problems_from(err, variant.data, variant.positions, Recipe, variant.name)) from None
    return LoadedRecipe(recipe, file, variant.name, variant.positions)
