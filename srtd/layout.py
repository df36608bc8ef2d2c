"""Where a job's files go inside its log directory: one table, one function.

Every log and every generated file of a job lives under its log directory.  What
goes where depends on the cluster's `log_layout` (docs/cluster.md):

- `split` (the default, srt-slurm's newest layout): worker, frontend and router
  logs and the configs workers dump go to `workers/`, service logs (and a source
  service's clone and build logs) to `services/logs/`, the metrics scraper's log
  and config to `telemetry/`; per-job files (the benchmark's log and results,
  configs the whole job shares) stay at the top.
- `flat` (srt-slurm before that change): everything at the top.

A service's own state (`services/<name>/src`, `services/<name>/data`) is under
`services/` in both.  Nothing else in srtd joins these directory names: each
writer asks `log_file` (through `PlanContext`), and every reader reads the path
the plan recorded (a unit's `log`, relative to the log directory).
"""

from __future__ import annotations

import posixpath
from enum import StrEnum
from typing import Literal

LogLayout = Literal["split", "flat"]
DEFAULT_LAYOUT: LogLayout = "split"


class Place(StrEnum):
    """What a file is, which decides its directory."""

    WORKER = "worker"  # engine workers, frontends, routers, nginx; the configs workers dump
    SERVICE = "service"  # service instances and a source service's clone and build
    TELEMETRY = "telemetry"  # the metrics scraper and the configs of what it scrapes
    SERVICE_STATE = "service-state"  # a service's checkout and data directory: services/<name>/...
    JOB = "job"  # per-job files: the benchmark's log, configs the whole job shares


_DIRECTORIES: dict[LogLayout, dict[Place, str]] = {
    "split": {
        Place.WORKER: "workers",
        Place.SERVICE: "services/logs",
        Place.TELEMETRY: "telemetry",
        Place.SERVICE_STATE: "services",
        Place.JOB: "",
    },
    "flat": {
        Place.WORKER: "",
        Place.SERVICE: "",
        Place.TELEMETRY: "",
        Place.SERVICE_STATE: "services",
        Place.JOB: "",
    },
}


def directory(layout: LogLayout, place: Place) -> str:
    """The directory (relative to the log directory; "" for its top) that files of `place` go to."""
    return _DIRECTORIES[layout][place]


def log_file(layout: LogLayout, place: Place, name: str) -> str:
    """`name`'s path relative to the log directory under `layout`."""
    folder = directory(layout, place)
    return posixpath.join(folder, name) if folder else name
