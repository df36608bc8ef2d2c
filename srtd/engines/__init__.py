"""Engines: how each engine's workers are launched.  One registry row per recipe engine model."""

from srtd.engines import _engines
from srtd.engines._base import (
    Engine,
    WorkerMode,
    all_rows,
    dynamo_env,
    engine_row,
    flags,
    register_engine,
    served_model_name,
)

__all__ = [
    "Engine",
    "WorkerMode",
    "_engines",
    "all_rows",
    "dynamo_env",
    "engine_row",
    "flags",
    "register_engine",
    "served_model_name",
]
