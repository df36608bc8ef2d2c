"""Engines: how each engine's workers are launched.  One registry row per recipe engine model."""

from srtd.engines import _engines, _sglang, _trtllm, _vllm  # noqa: F401 - the row modules register on import
from srtd.engines._base import (
    DIRECT_LAUNCH,
    DYNAMO_LAUNCH,
    Engine,
    WorkerLaunch,
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
from srtd.engines._observe import client_env as nsys_client_env
from srtd.engines._observe import observed_frontends, observed_workers
from srtd.engines._profiling import client_env as profiling_client_env
from srtd.engines._vllm import MORIIO_DISCOVERY_PORT, kv_connector

__all__ = [
    "DIRECT_LAUNCH",
    "DYNAMO_LAUNCH",
    "MORIIO_DISCOVERY_PORT",
    "Engine",
    "WorkerLaunch",
    "WorkerMode",
    "all_rows",
    "dynamo_env",
    "engine_row",
    "flags",
    "install_preamble",
    "kv_connector",
    "nsys_client_env",
    "observed_frontends",
    "observed_workers",
    "profiling_client_env",
    "register_engine",
    "served_model_name",
    "with_dynamo_install",
]
