"""Recipes: the YAML that describes one job, loaded into frozen, validated models.

    loaded = load_recipe("dsr1.yaml")      # -> LoadedRecipe(recipe=Recipe(...), file, variant, ...)
    loaded.recipe.roles["decode"].gpus

Every error is a `srtd.errors.RecipeError` listing each problem with its file,
line and column.
"""

from srtd.recipe._engines import ENGINE_MODELS, ENGINE_NAMES, CustomEngine, EngineConfig, ToyEngine
from srtd.recipe._loader import LoadedRecipe, load_recipe, load_recipes, load_text
from srtd.recipe._probes import ServiceReadiness, WorkerHealth
from srtd.recipe._recipe import Recipe
from srtd.recipe._roles import ROLE_NAMES, RestartPolicy, RoleConfig
from srtd.recipe._services import ServiceConfig, ServiceMetrics, ServicePlacement, SourceConfig


def recipe_json_schema() -> dict[str, object]:
    """The JSON Schema of a recipe, generated from the models (`srtd schema`)."""
    schema = Recipe.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "srtd recipe"
    return schema


__all__ = [
    "ENGINE_MODELS",
    "ENGINE_NAMES",
    "ROLE_NAMES",
    "CustomEngine",
    "EngineConfig",
    "LoadedRecipe",
    "Recipe",
    "RestartPolicy",
    "RoleConfig",
    "ServiceConfig",
    "ServiceMetrics",
    "ServicePlacement",
    "ServiceReadiness",
    "SourceConfig",
    "ToyEngine",
    "WorkerHealth",
    "load_recipe",
    "load_recipes",
    "load_text",
    "recipe_json_schema",
]
