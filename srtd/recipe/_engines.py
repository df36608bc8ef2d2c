"""Engine sections: `engine:` (or `roles.<role>.engine:`), one model per engine type.

An engine is written as a bare name (`engine: sglang`) or as a mapping with
`type` and the engine-wide knobs.  The name lives in exactly one place, the
`type` literal of its model here; `srtd.engines` keys its launch rows by these
classes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from srtd.recipe._base import Rules, Section, StrSeq
from srtd.recipe._probes import LivenessField, WorkerHealth


class SGLangEngine(Section):
    """SGLang workers (`python3 -m dynamo.sglang` or `python3 -m sglang.launch_server`)."""

    type: Literal["sglang"] = "sglang"
    gpu_type: str | None = None
    """Accepted for compatibility and ignored; the GPU type is `resources.gpu_type`."""


class VLLMFailover(Section):
    """Shadow engine recovery: standby engines per worker next to a GPU memory service.

    Each worker becomes a `gms` service plus `1 + shadow_engines` engine units on its
    node.  `restart` maps onto srtd's own restart policy of those units
    (docs/engines.md, "Shadow engine recovery").
    """

    shadow_engines: int = 1
    """Standby engines per worker."""
    restart: Literal["always", "never"] = "always"
    """`always`: relaunch an exited engine in place (it becomes the new standby);
    `never`: leave the exit to `roles.<role>.restart` and `critical`."""
    restart_backoff_seconds: float = 5.0
    """Delay before each relaunch (fixed, not doubled)."""
    shared_dir: str = "/dev/shm"
    """Node-local directory every container of a node sees; holds the service sockets."""

    @model_validator(mode="after")
    def _bounds(self) -> VLLMFailover:
        rules = Rules()
        if self.shadow_engines < 1:
            rules.add("shadow_engines", f"must be 1 or more, got {self.shadow_engines}")
        if self.restart_backoff_seconds < 0:
            rules.add("restart_backoff_seconds", f"must be 0 or more, got {self.restart_backoff_seconds:g}")
        if not self.shared_dir.startswith("/") or any(c in self.shared_dir for c in "\n\0"):
            rules.add("shared_dir", f"must be an absolute path, got {self.shared_dir!r}")
        rules.check()
        return self


class VLLMEngine(Section):
    """vLLM workers (`python3 -m dynamo.vllm` or `vllm serve`)."""

    type: Literal["vllm"] = "vllm"
    set_visible_devices: bool = False
    """Pin GPUs with the visible-devices variable instead of vLLM's device flag."""
    connector: str | None = "nixl"
    """KV connector between prefill and decode (nixl, lmcache, lmcache-mp, kvbm, moriio, or raw JSON)."""
    failover: VLLMFailover | None = None
    """Shadow engine recovery; implies a `gms` service per worker."""
    allow_prefill_decode_colocation: bool = False
    """Let prefill and decode workers share a node when their GPUs fit on it."""
    allow_prefill_decode_colocation_across_nodes: bool = False
    """Extend that packing across several nodes."""
    dp_launch_mode: Literal["per_gpu", "per_node"] = "per_node"
    """One process per GPU (deprecated) or per node for data-parallel workers."""
    vllm_serve_binary: str = "vllm"
    """Executable for direct `frontend.type: vllm` jobs."""


class TRTLLMEngine(Section):
    """TensorRT-LLM workers, one MPI step per endpoint."""

    type: Literal["trtllm"] = "trtllm"
    served_model_name: str | None = None
    """Model name clients ask for; defaults to the checkpoint directory name."""
    publish_metrics: bool = True
    """Pass `--publish-metrics` to the Dynamo TRT-LLM worker."""
    publish_events_and_metrics: bool | None = None
    """Legacy flag for Dynamo builds without `--publish-metrics`."""
    sequential_node_start: int = 0
    """Start co-located workers in batches of this size, each batch ready before the next (0: all)."""
    numa_memory_bind: bool | Literal["local"] | None = None
    """Worker memory policy (`numactl`); `local` binds to the GPU's NUMA node."""
    numa_cpu_bind: bool = False
    """Pin worker threads to the CPUs of their GPU's NUMA node."""


class MockerEngine(Section):
    """Dynamo's simulated engine: no GPU, real Dynamo runtime."""

    type: Literal["mocker"] = "mocker"
    engine_type: str = "vllm"
    """Engine whose scheduler the mocker imitates."""
    speedup_ratio: float = 100.0
    """How much faster than real time the simulation runs."""
    decode_speedup_ratio: float = 1.0
    """Extra speedup of decode steps."""
    num_gpu_blocks_override: int = 16384
    """Simulated KV-cache blocks."""
    max_num_seqs: int = 256
    """Sequences scheduled per step."""
    max_num_batched_tokens: int = 8192
    """Tokens scheduled per step."""
    block_size: int | None = None
    """KV block size in tokens; unset keeps the mocker's."""
    data_parallel_size: int = 1
    """Simulated data-parallel ranks per worker."""
    num_workers: int = 1
    """Mocker engines in one worker process."""
    startup_time: float | None = None
    """Simulated model-load time in seconds."""
    kv_transfer_bandwidth: float | None = None
    """Simulated prefill-to-decode transfer bandwidth."""
    kv_cache_dtype: str | None = None
    """KV dtype the simulation sizes blocks for."""
    enable_prefix_caching: bool = True
    """Simulate prefix caching."""
    enable_chunked_prefill: bool = True
    """Simulate chunked prefill."""
    preemption_mode: str | None = None
    """Scheduler preemption policy; unset keeps the mocker's."""


class TokenSpeedEngine(Section):
    """TokenSpeed workers: `python3 -m dynamo.tokenspeed` under Dynamo, or its gRPC servicer behind `smg`."""

    type: Literal["tokenspeed"] = "tokenspeed"


class AtomEngine(Section):
    """AMD ATOM workers."""

    type: Literal["atom"] = "atom"
    connector: Literal["mooncake"] = "mooncake"
    """KV transfer between prefill and decode."""
    mooncake_protocol: Literal["rdma", "tcp"] | None = None
    """Mooncake transport; unset lets ATOM choose."""


class TileRTEngine(Section):
    """TileRT decode workers."""

    type: Literal["tilert"] = "tilert"
    served_model_name: str | None = None
    """Model name reported to clients."""


class CustomEngine(Section):
    """Bring your own worker: an argv template and how to tell it is healthy.

    Placeholders in `command`: {host} (the worker's node address), {port} (its
    allocated HTTP port), {role}, {index}, {node}, {gpus} (comma-separated GPU
    indices), {gpu_count}, {model_path}, {served_model_name}.  `roles.<role>.args`
    are appended as flags.
    """

    type: Literal["custom"] = "custom"
    command: StrSeq
    """Worker argv template (never shell-interpreted)."""
    health: WorkerHealth | None = None
    """Readiness of one worker; a probe without `port` uses the worker's own {port}."""
    fatal_log_patterns: StrSeq = ()
    """Log lines that mean the worker is gone even if its process lives on (RE2 syntax)."""
    liveness: LivenessField = None
    """srtd: find a hung worker while it is ready (`default`: the `health` probe);
    `roles.<role>.liveness` wins over it."""

    @model_validator(mode="after")
    def _command_not_blank(self) -> CustomEngine:
        rules = Rules()
        rules.argv("command", self.command)
        rules.log_patterns("fatal_log_patterns", self.fatal_log_patterns)
        rules.check()
        return self


class ToyEngine(Section):
    """The toy OpenAI-compatible worker shipped with srtd (`srtd-toy-worker`).

    For demos and tests on a machine with no GPU.  `roles.<role>.args` become its
    flags (`startup-delay: 1.5` -> `--startup-delay 1.5`).
    """

    type: Literal["toy"] = "toy"
    token_latency_ms: float = 5.0
    """Simulated time per generated token."""


ENGINE_MODELS: tuple[type[Section], ...] = (
    SGLangEngine,
    VLLMEngine,
    TRTLLMEngine,
    MockerEngine,
    AtomEngine,
    TileRTEngine,
    TokenSpeedEngine,
    CustomEngine,
    ToyEngine,
)
ENGINE_NAMES: tuple[str, ...] = tuple(m.model_fields["type"].default for m in ENGINE_MODELS)


def _engine_from_name(value: Any) -> Any:
    # `engine: sglang` is short for `engine: {type: sglang}`.
    if isinstance(value, str):
        return {"type": value}
    return value


EngineConfig = Annotated[
    SGLangEngine
    | VLLMEngine
    | TRTLLMEngine
    | MockerEngine
    | AtomEngine
    | TileRTEngine
    | TokenSpeedEngine
    | CustomEngine
    | ToyEngine,
    Field(discriminator="type"),
]
EngineName = Literal[ENGINE_NAMES]  # type: ignore[valid-type]
EngineField = Annotated[
    EngineConfig | None,
    BeforeValidator(_engine_from_name, json_schema_input_type=EngineName | EngineConfig | None),
]

__all__ = ["ENGINE_MODELS", "ENGINE_NAMES", "EngineConfig", "EngineField"]
