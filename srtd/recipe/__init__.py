"""Recipes: the YAML that describes one job, loaded into frozen, validated models.

    loaded = load_recipe("dsr1.yaml")      # -> LoadedRecipe(recipe=Recipe(...), file, variant, ...)
    loaded.recipe.roles["decode"].gpus

Every error is a `srtd.errors.RecipeError` listing each problem with its file,
line and column.
"""

import typing
from typing import Any

from pydantic import BaseModel

from srtd.recipe._base import (
    MAX_JOB_NODES,
    MAX_WORKERS,
    RULES_ERROR,
    Rules,
    Section,
    SlurmTime,
    SrunOptions,
    attribute_docs,
)
from srtd.recipe._engines import (
    ENGINE_MODELS,
    ENGINE_NAMES,
    AtomEngine,
    CustomEngine,
    EngineConfig,
    MockerEngine,
    SGLangEngine,
    TileRTEngine,
    TokenSpeedEngine,
    ToyEngine,
    TRTLLMEngine,
    VLLMEngine,
    VLLMFailover,
)
from srtd.recipe._loader import LoadedRecipe, load_recipe, load_recipes, load_text
from srtd.recipe._migrate import Migration, migrate_text
from srtd.recipe._observability import ProfilingPhaseConfig
from srtd.recipe._probes import LivenessSpec, ServiceReadiness, WorkerHealth
from srtd.recipe._recipe import Recipe
from srtd.recipe._reporting import ReportingConfig, ReportingStatusConfig
from srtd.recipe._roles import ROLE_NAMES, RestartPolicy, RoleConfig
from srtd.recipe._sections import MANUAL_BENCHMARK, NO_FRONTEND, HostSetupConfig
from srtd.recipe._services import ServiceConfig, ServiceMetrics, ServicePlacement, SourceConfig


def recipe_json_schema() -> dict[str, Any]:
    """The JSON Schema of a recipe, generated from the models (`srtd schema`)."""
    schema: dict[str, Any] = Recipe.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "srtd recipe"
    models = {m.__name__: m for m in _all_models(Recipe)}
    for name, node in [("Recipe", schema), *schema.get("$defs", {}).items()]:
        model = models.get(name)
        if model is None:
            continue
        docs = attribute_docs(model)
        for field, info in model.model_fields.items():
            prop = node.get("properties", {}).get(info.alias or field)
            if prop is not None and field in docs:
                prop["description"] = docs[field]
    return schema


def _all_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: dict[type[BaseModel], None] = {}
    stack = [root]
    while stack:
        model = stack.pop()
        for cls in model.__mro__:
            if isinstance(cls, type) and issubclass(cls, Section) and cls not in seen:
                seen[cls] = None
        for info in model.model_fields.values():
            for arg in _walk(info.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                    stack.append(arg)
    return list(seen)


def _walk(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in typing.get_args(annotation):
        out.extend(_walk(arg))
    return out


__all__ = [
    "ENGINE_MODELS",
    "ENGINE_NAMES",
    "MANUAL_BENCHMARK",
    "MAX_JOB_NODES",
    "MAX_WORKERS",
    "NO_FRONTEND",
    "ROLE_NAMES",
    "RULES_ERROR",
    "AtomEngine",
    "CustomEngine",
    "EngineConfig",
    "HostSetupConfig",
    "LivenessSpec",
    "LoadedRecipe",
    "Migration",
    "MockerEngine",
    "ProfilingPhaseConfig",
    "Recipe",
    "ReportingConfig",
    "ReportingStatusConfig",
    "RestartPolicy",
    "RoleConfig",
    "Rules",
    "SGLangEngine",
    "Section",
    "ServiceConfig",
    "ServiceMetrics",
    "ServicePlacement",
    "ServiceReadiness",
    "SlurmTime",
    "SourceConfig",
    "SrunOptions",
    "TRTLLMEngine",
    "TileRTEngine",
    "TokenSpeedEngine",
    "ToyEngine",
    "VLLMEngine",
    "VLLMFailover",
    "WorkerHealth",
    "load_recipe",
    "load_recipes",
    "load_text",
    "migrate_text",
    "recipe_json_schema",
]
