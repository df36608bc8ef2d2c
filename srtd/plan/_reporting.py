"""`reporting.status` of the recipe and the cluster settings -> the plan's `StatusReporting`.

The recipe wins field by field over the cluster settings; endpoints named in the
recipe (`endpoint` or `endpoints`, even an empty list) replace the cluster's.  The
metadata the first status update of a run carries is computed here, where the
recipe is at hand, so the reporter reads plain data from the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from srtd._value import value_class
from srtd.cluster import Cluster
from srtd.recipe import Recipe, ReportingStatusConfig
from srtd.topology import ROLE_ORDER
from srtd.unit import Publisher, StatusReporting, Unit

DEFAULT_TOKEN_ENV = "SRTCTL_STATUS_TOKEN"


@value_class
class JobShape:
    """The planned facts the started report describes."""

    head: str
    log_dir: str
    gpus_per_node: int
    roles: dict[str, tuple[int, int, int]]  # role -> (workers, gpus per worker, nodes owned)


def _status_of(reporting: Any) -> ReportingStatusConfig | None:
    return reporting.status if reporting is not None else None


def _endpoints(config: ReportingStatusConfig) -> tuple[str, ...] | None:
    """Its endpoints, merged and deduplicated; None when it names none at all."""
    if config.endpoint is None and config.endpoints is None:
        return None
    merged = [config.endpoint] if config.endpoint else []
    merged += list(config.endpoints or ())
    return tuple(dict.fromkeys(e.rstrip("/") for e in merged))


def status_reporting(
    recipe: Recipe, cluster: Cluster, shape: JobShape, warn: Callable[[str], None]
) -> StatusReporting | None:
    """The reporting section of the plan, or None when no collector is configured."""
    layers = [c for c in (_status_of(cluster.reporting), _status_of(recipe.reporting)) if c is not None]
    endpoints: tuple[str, ...] = ()
    token_env = DEFAULT_TOKEN_ENV
    prefix = ""
    interval: float | None = None
    units: bool | None = None
    for layer in layers:  # cluster first, the recipe over it
        named = _endpoints(layer)
        endpoints = named if named is not None else endpoints
        token_env = layer.token_env or token_env
        prefix = layer.job_id_prefix if layer.job_id_prefix is not None else prefix
        interval = layer.logging_stream_interval if layer.logging_stream_interval is not None else interval
        units = layer.units if layer.units is not None else units
    if not endpoints:
        return None
    if interval is not None:
        warn("reporting.status.logging-stream-interval: raw log uploads are not supported yet; ignored")
    return StatusReporting(
        endpoints=endpoints,
        token_env=token_env,
        job_id_prefix=prefix,
        cluster=cluster.cluster,
        metadata=_metadata(recipe, cluster, shape),
        units=units,
    )


def _metadata(recipe: Recipe, cluster: Cluster, shape: JobShape) -> dict[str, Any]:
    """What upstream's `report_started` sends: model, resource shape, benchmark, engine, frontend, head, logs."""
    resources: dict[str, Any] = {
        "gpu_type": recipe.resources.gpu_type or cluster.default_gpu_type,
        "gpus_per_node": shape.gpus_per_node,
    }
    engines = []
    for role in ROLE_ORDER:
        if role not in shape.roles:
            continue
        workers, gpus, nodes = shape.roles[role]
        resources[f"{role}_workers"] = workers
        resources[f"{role}_nodes"] = nodes
        resources[f"gpus_per_{role}"] = gpus
        engine = recipe.engine_for(role)
        if engine is not None:
            engines.append(engine.type)
    cpus = recipe.srun_options.get("cpus-per-task") or cluster.default_srun_options.get("cpus-per-task")
    if cpus:
        resources["cpus_per_task"] = cpus
    return {
        "job_name": recipe.name,
        "cluster": cluster.cluster,
        "model": {"path": recipe.model.path, "precision": recipe.model.precision},
        "resources": resources,
        "benchmark_type": recipe.benchmark.type,
        "backend_type": engines[0] if engines else None,
        "frontend_type": recipe.frontend.type,
        "head_node": shape.head,
        "log_dir": shape.log_dir,
    }


def without_token(units: list[Unit], reporting: StatusReporting | None) -> list[Unit]:
    """Units that do not inherit the status token: only srtd itself talks to the collectors."""
    if reporting is None:
        return units
    name = reporting.token_env
    return [u if name in u.unset_env else replace(u, unset_env=(*u.unset_env, name)) for u in units]


def publishers(recipe: Recipe, log: Callable[[str], str]) -> tuple[Publisher, ...]:
    """`reporting.publishers` as plan data; `log` names a log file the way every unit's is named."""
    if recipe.reporting is None:
        return ()
    return tuple(
        Publisher(name=p.name, argv=tuple(p.command), timeout_seconds=p.timeout_seconds, log=log(f"publish_{p.name}"))
        for p in recipe.reporting.publishers
    )
