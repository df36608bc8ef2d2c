"""The recipe sections that shape the job: model, resources, slurm, frontend, dynamo, sweep,
benchmark, output, health_check, host_setup and post_eval.

What the job observes (profiling, observability, telemetry) is in `_observability`, what it
reports and is checked against (reporting, identity) in `_reporting`.  srtd acts on some of
these sections and only checks the shape of the rest, so a recipe written for srt-slurm loads
and the later features find their data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from srtd.recipe._base import AnyMap, EnvMap, NumSeq, Rules, Section, SlurmTime, StrSeq


def _digits_to_int(value: Any) -> Any:
    # Upstream examples write concurrency levels as quoted numbers (`["4", "8"]`)
    # and upstream's loader reads them as integers; so do we, for digits only.
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


Concurrency = Annotated[int, BeforeValidator(_digits_to_int)]


class ModelConfig(Section):
    """Model weights, the job's container image, and precision."""

    path: str
    """Weights directory, `hf:<repo>`, or a cluster `model_paths` alias; mounted at /model."""
    container: str
    """Image (`.sqsh` path or registry URI) or a cluster `containers` alias."""
    precision: str
    """Weight precision, recorded with results (`fp4`, `fp8`, `bf16`, ...)."""
    stage_dir: str | None = None
    """Copy the model to this node-local directory before workers start."""


MAX_GPUS_PER_NODE = 1024
MAX_SPARE_NODES = 64


class ResourceConfig(Section):
    """Cluster facts and allocation knobs; the worker topology is `roles:`."""

    gpu_type: str | None = None
    """GPU type (h100, gb200, ...); defaults to the cluster's."""
    gpus_per_node: int = 4
    """GPUs on each node."""
    spread_workers: bool = False
    """Give each partial-node worker its own node instead of packing them."""
    het_jobs: bool | None = None
    """Submit prefill and decode as two components of a heterogeneous job."""
    spare_nodes: Annotated[int, Field(ge=0, le=MAX_SPARE_NODES)] | None = None
    """srtd: nodes asked for beyond the job's, held back to replace a node that fails preflight or is
    lost (docs/nodes.md); the job is submitted with `--no-kill`.  Unset: the cluster's `spare_nodes`."""

    @model_validator(mode="after")
    def _positive(self) -> ResourceConfig:
        rules = Rules()
        if not 1 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:  # the cluster setting's range too
            rules.add("gpus_per_node", f"must be 1 to {MAX_GPUS_PER_NODE}, got {self.gpus_per_node}")
        rules.check()
        return self


class SlurmConfig(Section):
    """Slurm account, partition and time limit; unset values come from the cluster settings."""

    account: str | None = None
    """Slurm account."""
    partition: str | None = None
    """Slurm partition."""
    time_limit: SlurmTime | None = None
    """Time limit, HH:MM:SS."""


class PlacementConfig(Section):
    """Where the frontend or the benchmark client runs."""

    node: str = "head"
    """`head`, `dedicated` (a node of its own), or a role-relative name (`first_decode`, `last_decode`)."""

    @model_validator(mode="after")
    def _known(self) -> PlacementConfig:
        rules = Rules()
        if self.node not in ("head", "dedicated", "first_decode", "last_decode"):
            rules.add("node", f"must be head, dedicated, first_decode or last_decode, got {self.node!r}")
        rules.check()
        return self


# The two names the recipe's own rules need; their registry rows register under these constants.
NO_FRONTEND = "none"  # runs no frontend: only custom-engine roles may run
MANUAL_BENCHMARK = "manual"  # runs no client: the job serves until stopped


class FrontendConfig(Section):
    """The HTTP entry point in front of the workers."""

    type: str = "dynamo"
    """dynamo, sglang-router, vllm-router, sglang, vllm, trtllm_serve, toy-router, none, ..."""
    enable_multiple_frontends: bool = True
    """Several router replicas behind nginx."""
    num_additional_frontends: int = 9
    """Replicas beyond the first."""
    nginx_container: str = "nginx:1.27.4"
    """Image of the nginx in front of the replicas."""
    nginx_raise_ulimit: bool = False
    """Raise nofile before nginx starts."""
    nginx_session_affinity: bool = False
    """Hash a session header to one replica."""
    nginx_session_affinity_header: str = "X-Dynamo-Session-ID"
    """Header hashed when affinity is on."""
    nginx_keepalive_timeout: str = "600s"
    """Idle timeout of keepalive connections in nginx."""
    worker_selection: AnyMap | None = None
    """Dynamo worker-selection policy, written to a router policy file."""
    args: AnyMap | None = None
    """Flags of the frontend process."""
    env: EnvMap | None = None
    """Environment of the frontend processes."""
    container_image: str | None = None
    """Image of the router; defaults to the job's."""
    numa_bind: bool = False
    """Run the frontend under `numactl --cpunodebind=0 --membind=0`."""
    ctx_router: AnyMap | None = None
    """trtllm_serve orchestrator options."""
    gen_router: AnyMap | None = None
    """trtllm_serve generation router options."""
    server_config_extra: AnyMap | None = None
    """Extra top-level keys of the trtllm_serve orchestrator file."""
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    """Where the frontend runs."""

    @model_validator(mode="after")
    def _counts(self) -> FrontendConfig:
        rules = Rules()
        if self.num_additional_frontends < 0:
            rules.add("num_additional_frontends", f"must be 0 or more, got {self.num_additional_frontends}")
        if self.placement.node == "last_decode":
            rules.add(
                "placement.node",
                "last_decode is a benchmark placement; frontends use head, first_decode or dedicated",
            )
        rules.check()
        return self


class DynamoSourceConfig(Section):
    """Which Dynamo to install: exactly one of git+rev, pypi, or wheel."""

    git: str | None = None
    """Repository to build from."""
    rev: str | None = None
    """Immutable ref in `git`."""
    sha: str | None = None
    """The commit `rev` resolved to."""
    patches: AnyMap | None = None
    """Cargo dependency replacements applied before the build."""
    pypi: str | None = None
    """Release version from PyPI."""
    wheel: str | None = None
    """Staged nightly version."""

    @model_validator(mode="after")
    def _one_source(self) -> DynamoSourceConfig:
        rules = Rules()
        chosen = [k for k in ("rev", "pypi", "wheel") if getattr(self, k) is not None]
        if len(chosen) > 1:
            rules.add("", f"give exactly one of rev, pypi or wheel; found {', '.join(chosen)}")
        if self.git is not None and self.rev is None:
            rules.add("rev", "a git source needs an immutable rev")
        rules.check()
        return self


class DynamoConfig(Section):
    """Dynamo installation, planes, and sidecar mode."""

    install: bool = True
    """Install Dynamo into the container before workers start (`source`, else srtctl's default release)."""
    top_of_tree: bool = False
    """Build Dynamo at HEAD (unpinned)."""
    source: DynamoSourceConfig | None = None
    """Which Dynamo to install."""
    request_plane: Literal["nats", "tcp", "http"] = "tcp"
    """Transport from frontends to workers."""
    event_plane: Literal["nats", "zmq"] | None = None
    """Transport of KV and worker events."""
    sidecar: bool = False
    """Job-wide native sidecar mode."""
    sidecar_port: int = 50051
    """Base gRPC port between engine and sidecar."""
    sidecar_binary: str | None = None
    """Standalone sidecar executable."""
    sidecar_startup_timeout: int = 3600
    """Seconds to wait for the engine's gRPC endpoint."""
    sidecar_context_length: int | None = None
    """Context length the sidecar advertises."""
    sidecar_args: StrSeq = ()
    """Extra sidecar arguments."""

    @model_validator(mode="after")
    def _one_choice(self) -> DynamoConfig:
        if self.top_of_tree and self.source is not None:
            rules = Rules()
            rules.add("top_of_tree", "builds Dynamo's head, so it cannot go with `source`; pin a commit in source.rev")
            rules.check()
        return self


class SweepConfig(Section):
    """Accepted under `benchmark.sweep` for compatibility; srtd sweeps with the top-level `sweep:`."""

    mode: Literal["zip", "grid"] = "zip"
    """`zip` pairs values by position; `grid` takes every combination."""
    parameters: dict[str, tuple[Any, ...]] = {}
    """Parameter name -> values."""


class BenchmarkConfig(Section):
    """The client run once the workers are ready; `type` selects the runner."""

    type: str = MANUAL_BENCHMARK
    """`manual` (none: serve until stopped), `custom`, `toy`, `sa-bench`, ..."""
    stream_output: bool = False
    """Mirror the benchmark log to the console."""
    isl: int | None = None
    """Input sequence length."""
    osl: int | None = None
    """Output sequence length."""
    concurrencies: tuple[Concurrency, ...] | str | None = None
    """Concurrency levels: a list or an `x`-separated string (`4x8x16`)."""
    req_rate: str | int | None = "inf"
    """Request rate; `inf` as fast as concurrency allows."""
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    """Where the client runs: head, last_decode or dedicated."""
    colocate_with_frontend: bool = True
    """Dedicated client, frontend and infra share one reserved node."""
    sweep: SweepConfig | None = None
    """Accepted and ignored; use the top-level `sweep:`."""
    num_examples: int | None = None
    """Accuracy benchmarks: examples to run."""
    max_tokens: int | None = None
    """Maximum generated tokens per response."""
    repeat: int | None = None
    """Times each example is evaluated."""
    num_threads: int | None = None
    """Concurrent evaluation requests."""
    max_context_length: int | None = None
    """LongBench v2: skip longer examples."""
    categories: StrSeq | None = None
    """LongBench v2 categories."""
    num_shots: int | None = None
    """GSM8K few-shot examples."""
    temperature: float | None = None
    """Sampling temperature."""
    top_p: float | None = None
    """Nucleus sampling threshold."""
    top_k: int | None = None
    """Top-k cutoff."""
    num_requests: Annotated[int, Field(ge=1)] | None = None
    """Router benchmarks: requests to send."""
    concurrency: Annotated[int, Field(ge=1)] | None = None
    """Single concurrency level."""
    prefix_ratios: NumSeq | str | None = None
    """Router: shared-prefix ratios."""
    mooncake_workload: str | None = None
    """Mooncake router benchmark workload."""
    ttft_threshold_ms: int | None = None
    """Goodput TTFT threshold."""
    itl_threshold_ms: int | None = None
    """Goodput ITL threshold."""
    random_range_ratio: float | None = None
    """Random length range ratio."""
    num_prompts_mult: int | None = None
    """num_prompts = concurrency * this."""
    num_warmup_mult: int | None = None
    """Warmup prompts = concurrency * this."""
    dataset_name: str | None = None
    """Custom dataset name."""
    dataset_path: str | None = None
    """Dataset file inside the container."""
    agentperf_client_dir: str | None = None
    """AgentPerf client directory."""
    agentperf_config: str | None = None
    """AgentPerf workload file."""
    trace_file: str | None = None
    """Trace replay file."""
    custom_tokenizer: str | None = None
    """Tokenizer class path."""
    use_chat_template: bool = True
    """Pass --use-chat-template."""
    reuse_http_connections: bool = False
    """Reuse one HTTP connection pool."""
    skip_warmup: bool = False
    """sa-bench: skip the warmup round before each concurrency."""
    command: str | None = None
    """`custom`: a shell command run verbatim, with `bash -lc` in a container, `bash -c` on a host."""
    results_file: str | None = None
    """`custom`: the file the command writes its measurements to, in srtd's benchmark.json shape
    (docs/results.md); relative to the log directory.  Without it a custom benchmark is not read."""
    accept_empty: bool = False
    """Do not fail the job when the benchmark measured nothing (0 requests or tokens at a point)."""
    on_disruption: Literal["restart", "fail"] = "restart"
    """A spare replaced a lost node while the benchmark ran: `restart` it once the job serves again
    (the interrupted attempt's results are kept beside), or `fail` the job."""
    container_image: str | None = None
    """Image of the client; defaults to the job's."""
    env: EnvMap = {}
    """Extra environment of the client."""
    aiperf_package: str | None = None
    """pip spec of aiperf to install first."""
    aiperf_args: AnyMap = {}
    """Extra aiperf flags."""
    slow_down_sleep_time: float | None = None
    """SA-Bench: SGLang /slow_down sleep."""
    slow_down_wait_time: float | None = None
    """SA-Bench: seconds until slow_down is cleared."""

    @model_validator(mode="after")
    def _placement(self) -> BenchmarkConfig:
        rules = Rules()
        if self.placement.node == "first_decode":
            rules.add(
                "placement.node",
                "first_decode is a frontend placement; the client uses head, last_decode or dedicated",
            )
        rules.check()
        return self


class OutputConfig(Section):
    """Where the job writes logs and results."""

    log_dir: str | None = None
    """Log directory; `{job_id}`, `{name}` and `$VARS` expand."""


class HealthCheckConfig(Section):
    """How long the frontend gate waits for workers, and what kills a worker."""

    max_attempts: int = 180
    """Gate attempts before the job fails (with `interval_seconds`: 30 minutes)."""
    interval_seconds: int = 10
    """Seconds between gate attempts once the first quick ones failed."""
    fatal_log_markers: bool = True
    """Fail a worker as soon as its log prints a line its engine names as fatal."""
    extra_fatal_log_patterns: StrSeq = ()
    """More regular expressions (RE2 syntax) that fail a worker the same way."""

    @model_validator(mode="after")
    def _patterns_run_in_linear_time(self) -> HealthCheckConfig:
        rules = Rules()
        rules.log_patterns("extra_fatal_log_patterns", self.extra_fatal_log_patterns)
        rules.check()
        return self


def _enabled_shorthand(value: Any) -> Any:
    # `preflight: false` reads as upstream's `preflight: {enabled: false}`.
    return {"enabled": value} if isinstance(value, bool) else value


class PreflightConfig(Section):
    """The per-node check before anything launches (docs/nodes.md); `preflight: false` is short for
    `enabled: false`."""

    enabled: bool = True
    """Check every node (GPUs visible and free, log dir writable, ports free) before the units launch."""


PreflightField = Annotated[PreflightConfig, BeforeValidator(_enabled_shorthand)]


class HostSetupConfig(Section):
    """Commands on each node's bare host, outside any container, before anything of the job starts."""

    commands: StrSeq = ()
    """Shell commands run in order on each node, joined with `&&` into one `bash -c`."""
    teardown: StrSeq = ()
    """Shell commands run on each node after every unit has stopped, also when the job failed or was cancelled."""
    nodes: Literal["all", "workers"] = "all"
    """`all`: head, infra and worker nodes; `workers`: the worker nodes (and pools)."""
    ignore_failure: bool = False
    """A failing node is a warning and the job goes on, instead of failing the job."""
    timeout_seconds: Annotated[int, Field(ge=1)] = 300
    """Per-node budget for the commands, and again for the teardown; a hook still running then is stopped."""


class PostEvalConfig(Section):
    """Evaluation after the benchmark."""

    passthrough_env: StrSeq = ()
    """Variables forwarded into the eval process."""
    command: StrSeq | None = None
    """Argv replacing the built-in eval runner."""
