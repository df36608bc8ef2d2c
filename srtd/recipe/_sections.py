"""The recipe sections other than engines, roles and services.

srtd acts on some of these now (model, resources, slurm, frontend, dynamo,
benchmark, health_check, output) and only checks the shape of the rest
(profiling, observability, telemetry, reporting, identity, post_eval), so a
recipe written for srt-slurm loads and the later features find their data.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from srtd.recipe._base import AnyMap, EnvMap, NumSeq, Rules, Section, SlurmTime, StrMap, StrSeq


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
    """Install Dynamo into the container before workers start."""
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
    """`custom`: a shell command run with `bash -lc`, verbatim."""
    results_file: str | None = None
    """`custom`: the file the command writes its measurements to, in srtd's benchmark.json shape
    (docs/results.md); relative to the log directory.  Without it a custom benchmark is not read."""
    accept_empty: bool = False
    """Do not fail the job when the benchmark measured nothing (0 requests or tokens at a point)."""
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


class ProfilingPhaseConfig(Section):
    """Step window profiled for one role."""

    start_step: int | None = None
    """Step to start profiling."""
    stop_step: int | None = None
    """Step to stop profiling."""
    capture_scope: Literal["selected", "all"] = "all"
    """Every process of the role, or only the selected worker and rank."""
    worker_index: int = 0
    """Worker within the role."""
    worker_rank: int = 0
    """Process rank within that worker."""


class ProfilingConfig(Section):
    """Nsight Systems or PyTorch profiling of the workers."""

    type: Literal["none", "nsys", "nsys-time", "torch"] = "none"
    """none, nsys, nsys-time or torch."""
    extra_nsys_args: StrSeq | None = None
    """Extra `nsys profile` arguments."""
    nsys_trace: str = "cuda,nvtx"
    """Nsight activity domains."""
    trace_fork_before_exec: bool | None = None
    """Trace children forked before exec."""
    capture_range_end: str = "stop"
    """What closing a capture range does."""
    nsys_library_paths: StrSeq | None = None
    """Paths prepended to LD_LIBRARY_PATH for the profiler."""
    prefill: ProfilingPhaseConfig | None = None
    """Window of the prefill role."""
    decode: ProfilingPhaseConfig | None = None
    """Window of the decode role."""
    aggregated: ProfilingPhaseConfig | None = None
    """Window of the agg role."""
    delay_secs: int | None = None
    """nsys-time: seconds before capture."""
    duration_secs: int | None = None
    """nsys-time: seconds captured."""
    benchmark_duration_secs: int = 300
    """Traffic duration; covers delay + duration."""


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
    """More regular expressions that fail a worker the same way."""


class TelemetryExporterConfig(Section):
    """An exporter: image or host binary, and its port."""

    container_image: str
    """Exporter image; ignored when `binary` is set."""
    port: int
    """Port of its /metrics on every worker node."""
    command: str | None = None
    """Command line replacing the image's default arguments."""
    binary: str | None = None
    """Host executable run without a container."""


class TachometerConfig(Section):
    """Metrics capture; on unless `enabled: false`."""

    enabled: bool | None = None
    """Unset collects on every run; false opts out (and drops the implied exporters)."""
    binary_path: str = "tachometer-scraper"
    """Scraper command on the compute nodes."""
    collect_interval_ms: int = 1000
    """Milliseconds between scrapes."""
    sync_interval_secs: int = 120
    """Seconds between intermediate compactions."""
    shutdown_grace_secs: float = 120.0
    """Time to flush after SIGTERM."""
    compaction_threads: int = 4
    """Threads for compaction."""
    storage_subdir: str = "tachometer"
    """Output directory below the log dir."""
    extra_metadata: AnyMap = {}
    """Metadata attached to every endpoint."""
    default_exporters: bool = True
    """Run the built-in exporters when their blocks are unset."""
    default_gpu_exporter: TelemetryExporterConfig | None = None
    """GPU exporter resolved from the cluster settings."""
    dcgm_exporter: TelemetryExporterConfig | None = None
    """GPU exporter."""
    node_exporter: TelemetryExporterConfig | None = None
    """Host metrics exporter."""
    process_exporter: TelemetryExporterConfig | None = None
    """Per-process exporter."""

    @property
    def on(self) -> bool:
        return self.enabled is not False


class NsysObservabilityConfig(Section):
    """Automatic Nsight Systems capture."""

    enabled: bool = True
    """Set false to keep other signals without nsys."""
    capture_window: Literal["measured_workload", "including_startup"] = "measured_workload"
    """What the capture spans."""
    report_timeout_secs: int = 1800
    """Wait for a report to finalize."""
    nvtx_injection_path: str | None = None
    """NVTX injection library inside the container."""
    cpu_sampling: Literal["system-wide", "process-tree", "none"] = "system-wide"
    """CPU sampling scope."""


class ObservabilityConfig(Section):
    """Engine metrics and traces, metrics capture, Nsight tracing."""

    enabled: bool = False
    """Master analytics switch."""
    enable_otel: bool = False
    """Inject OTEL variables into workers and frontends."""
    otel_endpoint: str | None = None
    """OTEL collector endpoint."""
    tachometer: TachometerConfig = Field(default_factory=TachometerConfig)
    """Metrics capture."""
    nsys: NsysObservabilityConfig = Field(default_factory=NsysObservabilityConfig)
    """Automatic Nsight capture."""

    @model_validator(mode="after")
    def _otel(self) -> ObservabilityConfig:
        rules = Rules()
        if self.enable_otel and not self.otel_endpoint:
            rules.add("otel_endpoint", "is required when enable_otel is true")
        rules.check()
        return self


class CpuPowerExporterConfig(Section):
    """Head-node scrape of a per-node CPU power exporter."""

    port: int = 9405
    """Exporter port."""
    source: Literal["auto", "acpi", "dcgm"] = "auto"
    """Power reading back-end."""


class CpuPowerConfig(Section):
    """In-job CPU power collector on each node."""

    enabled: bool = False
    """Switch for this leg."""
    source: Literal["auto", "acpi", "dcgm"] = "auto"
    """Power reading provider."""
    sample_interval_seconds: float = 0.1
    """Read period."""
    startup_timeout_seconds: float = 30.0
    """Wait for collectors to be ready."""
    required: bool = False
    """Fail the job when the leg fails."""
    storage_subdir: str = "cpu_power"
    """Output directory below the log dir."""


class TelemetryConfig(Section):
    """GPU and CPU power sampling over the benchmark windows."""

    enabled: bool = False
    """Collect GPU power over each concurrency window."""
    dcgm_exporter: TelemetryExporterConfig | None = None
    """DCGM exporter; required when enabled."""
    collect_interval_ms: int = 1000
    """Milliseconds between collector cycles."""
    storage_subdir: str = "power"
    """Output directory below the log dir."""
    required: bool = False
    """Fail the benchmark without publishable power data."""
    startup_timeout_seconds: float = 30.0
    """Wait for exporters to answer."""
    request_timeout_seconds: float = 2.0
    """Per-request exporter timeout."""
    collector_join_timeout_seconds: float | None = None
    """Shutdown budget of the collector."""
    cpu_power_exporter: CpuPowerExporterConfig | None = None
    """Per-node CPU power exporter."""
    cpu_power: CpuPowerConfig = Field(default_factory=CpuPowerConfig)
    """In-job CPU power collector."""


class HostSetupConfig(Section):
    """Commands on each node's bare host, outside any container, before workers start."""

    commands: StrSeq = ()
    """Shell commands run in order."""
    teardown: StrSeq = ()
    """Shell commands run after workers stop, also when the job fails."""
    nodes: Literal["all", "workers"] = "all"
    """Every node, or only worker nodes."""
    ignore_failure: bool = False
    """A failing node warns instead of failing the job."""
    timeout_seconds: int = 300
    """Per-node budget."""


class PostEvalConfig(Section):
    """Evaluation after the benchmark."""

    passthrough_env: StrSeq = ()
    """Variables forwarded into the eval process."""
    command: StrSeq | None = None
    """Argv replacing the built-in eval runner."""


class IdentityModelConfig(Section):
    """The model that should be running."""

    repo: str | None = None
    """Hugging Face repo id."""
    revision: str | None = None
    """Commit SHA of the repo."""


class IdentityContainerConfig(Section):
    """The container that should be running."""

    image: str | None = None
    """Image URI."""


class IdentityConfig(Section):
    """What should be running, checked against the workers' fingerprints."""

    model: IdentityModelConfig = Field(default_factory=IdentityModelConfig)
    """Expected model."""
    container: IdentityContainerConfig = Field(default_factory=IdentityContainerConfig)
    """Expected container."""
    frameworks: StrMap = {}
    """Package -> expected version."""


class ReportingStatusConfig(Section):
    """Status collectors that receive lifecycle events."""

    endpoint: str | None = None
    """One collector base URL."""
    endpoints: StrSeq | None = None
    """Several collectors."""
    token_env: str | None = None
    """Name of the environment variable that holds the bearer token (default SRTCTL_STATUS_TOKEN)."""
    job_id_prefix: str | None = None
    """Prepended to the job id the collectors see (`cluster-a:`), so jobs of several clusters stay apart."""
    logging_stream_interval: float | None = Field(default=None, alias="logging-stream-interval")
    """Seconds between raw-log uploads; accepted, not acted on yet."""
    units: bool | None = None
    """Also send every journal event to `srtd collector`'s extension route (ignored by collectors without it)."""

    @model_validator(mode="after")
    def _rules(self) -> ReportingStatusConfig:
        rules = Rules()
        if self.endpoint is not None and not _is_http_url(self.endpoint):
            rules.add("endpoint", f"must be an http:// or https:// URL, got {self.endpoint!r}")
        for i, endpoint in enumerate(self.endpoints or ()):
            if not _is_http_url(endpoint):
                rules.add(f"endpoints.{i}", f"must be an http:// or https:// URL, got {endpoint!r}")
        if self.token_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.token_env):
            rules.add("token_env", "must be the name of an environment variable (the token itself stays out of files)")
        rules.check()
        return self


def _is_http_url(text: str) -> bool:
    scheme, _, rest = text.partition("://")
    return scheme in ("http", "https") and bool(rest.strip("/")) and not any(c.isspace() for c in text)


def _no_literal_secret(rules: Rules, section: Section, fields: dict[str, str]) -> None:
    # Tokens come only from the environment: a literal one would land in plans,
    # journals and copied recipes.
    for field, variable in fields.items():
        if getattr(section, field) is not None:
            rules.add(field, f"secrets are not accepted in a recipe; set ${variable} in the environment")


class AIAnalysisConfig(Section):
    """Failure analysis after a failed job."""

    enabled: bool = False
    """Run the analysis."""
    openrouter_api_key: str | None = None
    """Refused: set OPENROUTER_API_KEY in the environment."""
    gh_token: str | None = None
    """Refused: set GH_TOKEN in the environment."""
    repos_to_search: StrSeq = ()
    """Repositories searched for related changes."""
    pr_search_days: int = 14
    """Days to look back."""
    prompt: str | None = None
    """Prompt template."""

    @model_validator(mode="after")
    def _secrets(self) -> AIAnalysisConfig:
        rules = Rules()
        _no_literal_secret(rules, self, {"openrouter_api_key": "OPENROUTER_API_KEY", "gh_token": "GH_TOKEN"})
        rules.check()
        return self


class S3Config(Section):
    """Upload of the log directory to S3-compatible storage."""

    bucket: str
    """Bucket name."""
    prefix: str | None = None
    """Prefix within the bucket."""
    region: str | None = None
    """Region."""
    endpoint_url: str | None = None
    """S3-compatible endpoint."""
    access_key_id: str | None = None
    """Refused: set AWS_ACCESS_KEY_ID in the environment."""
    secret_access_key: str | None = None
    """Refused: set AWS_SECRET_ACCESS_KEY in the environment."""
    exclude: StrSeq | None = None
    """Patterns left out of the upload."""
    archive: StrSeq | None = None
    """Patterns packed into one archive."""

    @model_validator(mode="after")
    def _secrets(self) -> S3Config:
        rules = Rules()
        _no_literal_secret(
            rules, self, {"access_key_id": "AWS_ACCESS_KEY_ID", "secret_access_key": "AWS_SECRET_ACCESS_KEY"}
        )
        rules.check()
        return self


class ReportingConfig(Section):
    """Status reporting, failure analysis, log upload."""

    status: ReportingStatusConfig | None = None
    """Status collectors."""
    ai_analysis: AIAnalysisConfig | None = None
    """Failure analysis."""
    s3: S3Config | None = None
    """Log upload."""
