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
    with_dynamo_install,
)
from srtd.engines._dynamo_install import install_preamble
from srtd.engines._engines import MORIIO_DISCOVERY_PORT, kv_connector

__all__ = [
    "MORIIO_DISCOVERY_PORT",
    "Engine",
    "WorkerMode",
    "_engines",
    "all_rows",
    "dynamo_env",
    "engine_row",
    "flags",
    "install_preamble",
    "kv_connector",
    "register_engine",
    "served_model_name",
    "with_dynamo_install",
]
