"""The recipe sections of what a job observes: profiling, observability and telemetry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from srtd.recipe._base import AnyMap, Rules, Section, StrSeq


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


class GpuLabels(Section):
    """Which labels of the exporter's samples name a GPU."""

    index: str
    """Label holding the GPU's index on its node."""
    identity: str | None = None
    """Label holding a stable identity of the GPU (serial number, UUID)."""


class GpuMetric(Section):
    """One GPU signal in the exporter's output."""

    metric: str
    """Metric name as the exporter writes it."""
    scope: str | None = None
    """Fully qualified name when the exporter prefixes its metrics."""


class TelemetryExporterConfig(Section):
    """An exporter: image or host binary, its port, and how to read GPUs from it."""

    container_image: str
    """Exporter image; ignored when `binary` is set."""
    port: int
    """Port of its /metrics on every worker node."""
    command: str | None = None
    """Command line replacing the image's default arguments."""
    binary: str | None = None
    """Host executable run without a container."""
    kind: str = "dcgm"
    """Exporter kind: `dcgm` (NVIDIA DCGM's names) or `custom` (name the labels and metrics)."""
    gpu_labels: GpuLabels | None = None
    """Labels naming a GPU; unset keeps the kind's."""
    gpu_metrics: dict[str, GpuMetric] | None = None
    """Signal name (power, gpu_util, temperature, ...) -> its metric; merged over the kind's."""


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
    """CPU sampling scope of every captured process."""
    frontend_cpu_sampling: bool | None = None
    """Newer srt-slurm: sample CPUs system-wide on frontends only (false: nowhere); unset: cpu_sampling."""

    @model_validator(mode="after")
    def _bounds(self) -> NsysObservabilityConfig:
        rules = Rules()
        if self.report_timeout_secs <= 0:
            rules.add("report_timeout_secs", f"must be a positive number of seconds, not {self.report_timeout_secs}")
        if self.nvtx_injection_path is not None and not self.nvtx_injection_path.startswith("/"):
            rules.add("nvtx_injection_path", "must be an absolute path inside the container")
        rules.check()
        return self


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
