"""Power telemetry's GPU exporter (`telemetry.dcgm_exporter`): its kinds, its unit, its windows.

With `telemetry.enabled` the job runs the recipe's GPU exporter on every node (as the
`dcgm-exporter` service, in place of the metrics scraper's own), tells the benchmark
client where to mark its measurement windows (`SRT_MEASUREMENT_WINDOW_DIR`), and
writes `<storage_subdir>/exporters.json`: every exporter endpoint with the labels and
metrics that name a GPU's power, utilisation and temperature in its output.  What
those names are depends on the exporter's kind, a row of `EXPORTER_KINDS`.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Iterable
from typing import Any, ClassVar

from srtd._registry import Registry, Row
from srtd.context import PlanContext
from srtd.recipe import Recipe
from srtd.unit import PowerEndpoint, PowerSampling

GPU_EXPORTER = "dcgm-exporter"  # the service kind that runs a GPU exporter
WINDOW_ENV = "SRT_MEASUREMENT_WINDOW_DIR"
EXPORTERS_FILE = "exporters.json"
_WHY = "telemetry (GPU power over the benchmark windows)"


class ExporterKind(Row):
    """How to read GPUs from one kind of exporter."""

    labels: ClassVar[dict[str, str | None]] = {}
    metrics: ClassVar[dict[str, dict[str, str | None]]] = {}
    needs: ClassVar[tuple[str, ...]] = ()  # what the recipe must name itself: "gpu_labels", "power"


EXPORTER_KINDS: Registry[ExporterKind] = Registry("telemetry exporter kind")


@EXPORTER_KINDS.register("dcgm")
class Dcgm(ExporterKind):
    """NVIDIA's dcgm-exporter: DCGM field names, GPUs by `gpu` index and `UUID`."""

    labels = {"index": "gpu", "identity": "UUID"}
    metrics = {
        "power": {"metric": "DCGM_FI_DEV_POWER_USAGE", "scope": None},
        "gpu_util": {"metric": "DCGM_FI_DEV_GPU_UTIL", "scope": None},
        "temperature": {"metric": "DCGM_FI_DEV_GPU_TEMP", "scope": None},
    }


@EXPORTER_KINDS.register("custom")
class Custom(ExporterKind):
    """Any other exporter (AMD's device-metrics-exporter, ...): the recipe names its labels and power metric."""

    needs = ("command", "gpu_labels", "power")


def telemetry_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """(path, message) of a telemetry block the exporter kinds refuse."""
    telemetry = recipe.telemetry
    exporter = telemetry.dcgm_exporter
    if exporter is None:
        return []
    path = "telemetry.dcgm_exporter"
    kind = EXPORTER_KINDS.get(exporter.kind)
    if kind is None:
        return [(f"{path}.kind", EXPORTER_KINDS.unknown(exporter.kind))]
    problems = []
    if telemetry.enabled and exporter.binary:
        problems.append((f"{path}.binary", "a host exporter binary is not run by srtd yet; name `container_image`"))
    if "command" in kind.needs and not exporter.command:
        problems.append((f"{path}.command", f"is required for kind {kind.name!r} (srtd knows no default for it)"))
    if "gpu_labels" in kind.needs and exporter.gpu_labels is None:
        problems.append((f"{path}.gpu_labels", f"is required for kind {kind.name!r} (at least `index`)"))
    if "power" in kind.needs and "power" not in (exporter.gpu_metrics or {}):
        problems.append((f"{path}.gpu_metrics", f"needs a `power` metric for kind {kind.name!r}"))
    return problems


def telemetry_exporter_service(recipe: Recipe) -> tuple[dict[str, Any], str] | None:
    """The GPU exporter power telemetry runs, as a `dcgm-exporter` service entry (None: telemetry off)."""
    telemetry = recipe.telemetry
    exporter = telemetry.dcgm_exporter
    if not telemetry.enabled:
        return None
    options: dict[str, Any] = {"collect_interval_ms": telemetry.collect_interval_ms}
    entry: dict[str, Any] = {"name": GPU_EXPORTER, "type": GPU_EXPORTER, "options": options}
    if exporter is None:
        return entry, _WHY  # the kind's own image and command
    options["port"] = exporter.port
    entry["container"] = exporter.container_image
    if exporter.command:
        entry["command"] = tuple(shlex.split(exporter.command))  # the recipe's words, split, never a shell
    return entry, _WHY


def gpu_exporter_port(ctx: PlanContext) -> int | None:
    """The port of power telemetry's own GPU exporter (None: telemetry off, the kind's default applies)."""
    exporter = ctx.recipe.telemetry.dcgm_exporter
    return exporter.port if ctx.recipe.telemetry.enabled and exporter is not None else None


def window_dir(ctx: PlanContext) -> str:
    """Where the benchmark client marks its measurement windows, as the client sees it."""
    return posixpath.join(ctx.logs_path, ctx.recipe.telemetry.storage_subdir, "windows")


def exporters_document(ctx: PlanContext, nodes: Iterable[str], port: int) -> str:
    """`exporters.json`: every GPU exporter endpoint and how to find a GPU's signals in it."""
    exporter = ctx.recipe.telemetry.dcgm_exporter
    kind = EXPORTER_KINDS.get(exporter.kind if exporter else "dcgm") or Dcgm()
    labels = dict(kind.labels)
    metrics = {k: dict(v) for k, v in kind.metrics.items()}
    if exporter is not None and exporter.gpu_labels is not None:
        labels = exporter.gpu_labels.model_dump()
    for signal, metric in ((exporter.gpu_metrics or {}) if exporter else {}).items():
        metrics[signal] = metric.model_dump()
    doc = {
        "kind": kind.name,
        "gpu_labels": labels,
        "gpu_metrics": metrics,
        "endpoints": [{"node": n, "url": f"http://{ctx.address(n)}:{port}/metrics"} for n in nodes],
        "windows": window_dir(ctx),
    }
    return json.dumps(doc, indent=2) + "\n"


def power_sampling(ctx: PlanContext, nodes: Iterable[str], port: int) -> PowerSampling:
    """What srtd samples over the job: the power metric of every GPU exporter (`Plan.power`)."""
    telemetry = ctx.recipe.telemetry
    doc = json.loads(exporters_document(ctx, nodes, port))
    power = doc["gpu_metrics"].get("power") or {}
    labels = doc["gpu_labels"]
    return PowerSampling(
        dir=posixpath.join(ctx.log_dir, telemetry.storage_subdir),
        endpoints=tuple(PowerEndpoint(node=e["node"], url=e["url"]) for e in doc["endpoints"]),
        metric=power.get("scope") or power["metric"],
        index_label=labels["index"],
        identity_label=labels.get("identity"),
        interval_seconds=telemetry.collect_interval_ms / 1000,
        request_timeout_seconds=telemetry.request_timeout_seconds,
        required=telemetry.required,
    )
