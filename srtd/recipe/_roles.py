"""Worker roles: `roles.prefill`, `roles.decode`, `roles.agg`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from srtd.recipe._base import MAX_JOB_NODES, MAX_WORKERS, AnyMap, EnvMap, Rules, Section, SrunOptions, StrSeq
from srtd.recipe._engines import EngineField
from srtd.recipe._probes import LivenessField

ROLE_NAMES: tuple[str, ...] = ("prefill", "decode", "agg")
RestartName = Literal["never", "on-failure", "always"]


def _node_count(value: Any) -> Any:
    # One message for the whole union, not one per member.
    if value is None or value == "colocate" or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise PydanticCustomError("node_count", "must be a number of nodes or 'colocate'")


NodeCount = Annotated[
    int | Literal["colocate"] | None,
    BeforeValidator(_node_count, json_schema_input_type=int | Literal["colocate"] | None),
]


class RestartPolicy(Section):
    """How a worker of one role is relaunched when it exits mid-run."""

    policy: RestartName = "never"
    """`never` leaves the exit to `critical`; `on-failure` relaunches after a non-zero exit;
    `always` after any exit."""
    max_restarts: int = 3
    """Relaunches allowed per worker over the whole job."""
    backoff_seconds: float = 10.0
    """Delay before the first relaunch; doubles on each further one."""
    max_backoff_seconds: float = 300.0
    """Cap on the doubled delay."""

    @model_validator(mode="after")
    def _bounds(self) -> RestartPolicy:
        rules = Rules()
        if self.max_restarts < 0:
            rules.add("max_restarts", f"must be 0 or more, got {self.max_restarts}")
        if self.backoff_seconds < 0:
            rules.add("backoff_seconds", f"must be 0 or more, got {self.backoff_seconds:g}")
        if self.max_backoff_seconds < self.backoff_seconds:
            rules.add(
                "max_backoff_seconds",
                f"must be at least backoff_seconds ({self.backoff_seconds:g}), got {self.max_backoff_seconds:g}",
            )
        rules.check()
        return self


def _restart_from_name(value: Any) -> Any:
    # `restart: on-failure` is short for `restart: {policy: on-failure}`.
    if isinstance(value, str):
        return {"policy": value}
    return value


RestartField = Annotated[
    RestartPolicy,
    BeforeValidator(_restart_from_name, json_schema_input_type=RestartName | RestartPolicy),
]


class RoleConfig(Section):
    """One worker role: how many workers, on how many nodes, with which GPUs and flags."""

    nodes: NodeCount = None
    """Nodes reserved for the role.  `colocate` (decode only; `0` means the same) packs the
    decode workers onto the prefill nodes' free GPUs."""
    workers: int | None = None
    """Number of workers of this role."""
    gpus: int | None = None
    """GPUs per worker; defaults to nodes * gpus_per_node // workers."""
    srun_options: SrunOptions = {}
    """srun options for this role's worker steps, over the recipe's `srun_options`."""
    env: EnvMap = {}
    """Environment of every worker of this role."""
    args: AnyMap = {}
    """The engine's own flags for this role (`tensor-parallel-size: 4`)."""
    extra_args: StrSeq = ()
    """Raw extra arguments appended to the worker command (TRT-LLM)."""
    engine: EngineField = None
    """This role's engine, when the recipe has no top-level `engine`."""
    container: str | None = None
    """Image for this role's workers; defaults to `model.container`."""
    kv_events: bool | AnyMap | None = None
    """`true` for the default KV-event publisher, or a mapping with `publisher` / `topic`."""
    mooncake_store_config: AnyMap | None = None
    """Mooncake store client settings of this role's workers (`protocol`, `global_segment_size`, ...),
    written to a JSON file the workers find through MOONCAKE_CONFIG_PATH."""
    sidecar: bool | None = None
    """Run the native engine behind a Dynamo sidecar; every role must agree."""
    critical: bool = True
    """A worker of this role failing for good fails the job."""
    restart: RestartField = Field(default_factory=RestartPolicy)
    """Relaunch exited workers: `never`, `on-failure`, `always`, or a policy mapping."""
    liveness: LivenessField = None
    """srtd: find a hung worker while it is ready (`default`: the engine's health endpoint)."""

    @property
    def colocated(self) -> bool:
        return self.nodes in ("colocate", 0)

    @model_validator(mode="after")
    def _counts(self) -> RoleConfig:
        rules = Rules()
        if isinstance(self.nodes, int) and self.nodes < 0:
            rules.add("nodes", f"must be 0 or more, got {self.nodes}")
        if isinstance(self.nodes, int) and self.nodes > MAX_JOB_NODES:
            rules.add("nodes", f"must be at most {MAX_JOB_NODES} (a job's node limit), got {self.nodes}")
        if self.workers is not None and self.workers < 1:
            rules.add("workers", f"must be at least 1, got {self.workers}")
        if self.workers is not None and self.workers > MAX_WORKERS:
            rules.add("workers", f"must be at most {MAX_WORKERS} (a job's worker limit), got {self.workers}")
        if self.gpus is not None and self.gpus < 1:
            rules.add("gpus", f"must be at least 1, got {self.gpus}")
        rules.check()
        return self
