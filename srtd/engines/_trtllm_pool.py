"""TensorRT-LLM workers in a Mooncake pool run by TRT-LLM's own master.

A `mooncake-master` with pool options (`eviction_ratio`, `master_timeout_s`,
`store_role`) is `trtllm-serve mooncake_master`; its members find it through an
address file in the log directory, not a variable.  Every TRT-LLM worker then
gets the master's timeout and its own run directory; a role whose engine args
carry a `mooncake-store` KV connector also gets the store role, and under
`dynamo.trtllm` (which does not provision a pool itself) its worker starts
through a small wrapper that provisions the pool around the Dynamo entry point,
as `trtllm-serve` does on its own.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from srtd.context import PlanContext
from srtd.services import pool_run_dir, pool_timeout_env
from srtd.topology import Process

# argv[1] is the role's engine config (the file `--extra-engine-args` names too);
# the pool lives as long as the Dynamo worker the `with` block runs.
_PROVISION = """import runpy, sys, yaml
from tensorrt_llm.llmapi.llm_args import KvCacheConnectorConfig
from tensorrt_llm._torch.pyexecutor.connectors.mooncake_store import maybe_provision_pool
config_path = sys.argv.pop(1)
with open(config_path) as config_file:
    connector = KvCacheConnectorConfig(**yaml.safe_load(config_file)["kv_connector_config"])
with maybe_provision_pool(connector):
    runpy.run_module("dynamo.trtllm", run_name="__main__", alter_sys=True)
"""


# TensorRT-LLM's name for its Mooncake KV connector (`kv_connector_config.connector`), not a service kind
MOONCAKE_STORE_CONNECTOR = "mooncake-store"


def stores_in_pool(args: Mapping[str, Any]) -> bool:
    """The role's engine writes to and reads from the pool (its KV connector is the Mooncake store)."""
    connector = args.get("kv_connector_config")
    return isinstance(connector, Mapping) and connector.get("connector") == MOONCAKE_STORE_CONNECTOR


def _member(role: str, proc: Process) -> str:
    return f"{role}-{proc.endpoint.index}"


def pool_env(ctx: PlanContext, role: str) -> dict[str, str]:
    if ctx.mooncake_pool is None:
        return {}
    env = pool_timeout_env(ctx.mooncake_pool)
    store_role = ctx.mooncake_pool.get("store_role")
    if store_role is not None and stores_in_pool(ctx.recipe.roles[role].args):
        env["TRTLLM_MOONCAKE_STORE_ROLE"] = str(store_role)
    return env


def pool_preamble(ctx: PlanContext, role: str, proc: Process) -> str | None:
    """The worker's own run directory, exported and created before the engine starts."""
    if ctx.mooncake_pool is None:
        return None
    run_dir = shlex.quote(pool_run_dir(ctx, _member(role, proc)))
    return f'export TRTLLM_MOONCAKE_RUN_DIR={run_dir}; mkdir -p "$TRTLLM_MOONCAKE_RUN_DIR"'


def dynamo_entry(ctx: PlanContext, role: str, config: str) -> list[str]:
    """How `dynamo.trtllm` starts: through the provisioning wrapper when the role stores in the pool."""
    if ctx.mooncake_pool is not None and stores_in_pool(ctx.recipe.roles[role].args):
        return ["python3", "-c", _PROVISION, config]
    return ["python3", "-m", "dynamo.trtllm"]
