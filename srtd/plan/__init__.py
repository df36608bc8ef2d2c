"""The Plan: recipe + cluster settings + nodes -> every unit of the job, offline."""

from __future__ import annotations

from srtd.errors import Problem
from srtd.recipe import LoadedRecipe


def check_recipe(loaded: LoadedRecipe) -> list[Problem]:
    """Rules that need the engine, frontend and service registries."""
    return []
