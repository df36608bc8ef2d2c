"""Status reporting to srt-slurm's collectors (docs/recipe.md, status reporting).

Public surface:

- `status_service()`: a service for `srtd.supervisor.run(..., services=[...])` that
  reports the job to the collectors of its plan's `reporting` (nothing without one).
- `StatusReporter(plan)`: what the service runs: the job's events in (`reporter(event)`),
  `POST`/`PUT` requests out on a background task (`await reporter.run()`), a bounded
  last word (`await reporter.finish()`).
- `report_submitted(settings, job_id, job_name=..., recipe=..., metadata=...)`: the
  POST of a submitted job (for `srtd submit`); `post_submitted` is its async form.
- `publish_results`: the after-job hook that runs the plan's result publishers
  (`srtd.supervisor.run(..., after_job=[publish_results])`); `publication` is the
  document they read.
- `power_telemetry()`: a service and an after-job hook sharing one `PowerSampler`: GPU
  power sampled from the plan's `power` exporters while the job runs, then every
  measurement window checked and `manifest.json` written (docs/services.md).
- `StageFold`, `Status`, `Stage`, `Request`: the pure event -> request logic and the
  contract's values.

This package reads the plan and the events only; the supervisor knows nothing of it.
"""

from typing import TYPE_CHECKING

from srtd._lazy import lazy_attributes
from srtd.reporting._service import status_service

if TYPE_CHECKING:
    from srtd.reporting._contract import Request, Stage, Status
    from srtd.reporting._fold import PHASE_STAGE, StageFold, collector_job_id
    from srtd.reporting._power import PowerSampler
    from srtd.reporting._publishers import PUBLISH_FORMAT, publication, publish_results
    from srtd.reporting._reporter import FINAL_WAIT, StatusReporter, post_submitted, report_submitted
    from srtd.reporting._telemetry import power_telemetry

# public name -> its module: imported on first use, so a job that reports nothing
# never loads the reporter (and httpx with it)
_LAZY = {
    **dict.fromkeys(("Request", "Stage", "Status"), "_contract"),
    **dict.fromkeys(("PHASE_STAGE", "StageFold", "collector_job_id"), "_fold"),
    **dict.fromkeys(("PUBLISH_FORMAT", "publication", "publish_results"), "_publishers"),
    "PowerSampler": "_power",
    **dict.fromkeys(("FINAL_WAIT", "StatusReporter", "post_submitted", "report_submitted"), "_reporter"),
    "power_telemetry": "_telemetry",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "FINAL_WAIT",
    "PHASE_STAGE",
    "PUBLISH_FORMAT",
    "PowerSampler",
    "Request",
    "Stage",
    "StageFold",
    "Status",
    "StatusReporter",
    "collector_job_id",
    "post_submitted",
    "power_telemetry",
    "publication",
    "publish_results",
    "report_submitted",
    "status_service",
]
