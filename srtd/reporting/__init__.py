"""Status reporting to srt-slurm's collectors (docs/recipe.md, status reporting).

Public surface:

- `StatusReporter(plan)`: an observer for `srtd.supervisor.run` that turns the job's
  events into `POST`/`PUT` requests on a background task (`reporter(event)`,
  `await reporter.run()`, `await reporter.finish()`).
- `report_submitted(settings, job_id, job_name=..., recipe=..., metadata=...)`: the
  POST of a submitted job (for `srtd submit`); `post_submitted` is its async form.
- `StageFold`, `Status`, `Stage`, `Request`: the pure event -> request logic and the
  contract's values.

This package reads the plan and the events only; the supervisor knows nothing of it.
"""

from srtd.reporting._contract import Request, Stage, Status
from srtd.reporting._fold import PHASE_STAGE, StageFold, collector_job_id
from srtd.reporting._reporter import FINAL_WAIT, StatusReporter, post_submitted, report_submitted

__all__ = [
    "FINAL_WAIT",
    "PHASE_STAGE",
    "Request",
    "Stage",
    "StageFold",
    "Status",
    "StatusReporter",
    "collector_job_id",
    "post_submitted",
    "report_submitted",
]
