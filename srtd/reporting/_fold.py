"""Folding the journal's events into the collector's statuses and stages.

Pure logic, no I/O: `StageFold.feed(event)` returns the requests that event calls
for.  A stage is entered when the first unit of one of its phases is launched
(the unit's `starting` event); stages only move forward, and entering one reports
every earlier stage of the plan not reported yet, so a collector always sees them
in the contract's order (phases are barriers: a later phase starts only once the
earlier ones are ready).
"""

from __future__ import annotations

from srtd.events import Event, JobState, UnitState
from srtd.reporting._contract import Request, Stage, Status, iso, job_created, job_updated
from srtd.unit import Plan

# plan phase -> the collector stage its units enter.  `after_frontend` services (sidecars,
# terminal services) enter none: they run within whatever stage the job is in.
PHASE_STAGE = {
    "infra": Stage.HEAD_INFRASTRUCTURE,
    "before_workers": Stage.HEAD_INFRASTRUCTURE,
    "workers": Stage.WORKERS,
    "frontend": Stage.FRONTEND,
    "benchmark": Stage.BENCHMARK,
}
# stage -> (status, message) of the PUT that enters it, in the contract's order
ENTRY = {
    Stage.HEAD_INFRASTRUCTURE: (Status.STARTING, "Starting infrastructure services"),
    Stage.WORKERS: (Status.WORKERS, "Starting workers"),
    Stage.FRONTEND: (Status.FRONTEND, "Starting frontend"),
    Stage.BENCHMARK: (Status.BENCHMARK, "Running benchmark"),
}
ORDER = list(ENTRY)


def collector_job_id(plan: Plan) -> str:
    """The id the collectors know the job by: the configured prefix, then the plan's job id."""
    prefix = plan.reporting.job_id_prefix if plan.reporting is not None else ""
    return prefix + plan.job_id


class StageFold:
    """The requests each event of one job calls for.

    `post_job`: also record the job (`POST /api/jobs`) when it starts: for runs that
    no `srtd submit` announced (local runs).
    """

    def __init__(self, plan: Plan, *, post_job: bool = False, user: str | None = None) -> None:
        self.plan = plan
        self.user = user
        self.job_id = collector_job_id(plan)
        self.post_job = post_job
        self._unit_stage = {u.name: PHASE_STAGE.get(u.phase) for u in plan.units}
        self._critical = {u.name for u in plan.units if u.critical}
        present = {s for s in self._unit_stage.values() if s is not None}
        self._stages = [s for s in ORDER if s in present]
        self._entered = -1  # index into self._stages
        self._stage = Stage.STARTING
        self._failed_reported = False
        self._ending = False
        self._done = False
        self._results: list[dict[str, object]] = []  # the benchmark's points so far

    def feed(self, event: Event) -> list[Request]:
        if self._done:
            return []
        if event.unit is None:
            return self._job(event)
        return self._unit(event)

    def _job(self, event: Event) -> list[Request]:
        state = JobState(event.state)
        if state is JobState.STARTING and event.prev is None:
            return self._started(event)
        if state is JobState.STOPPING:
            self._ending = True
            return []
        if state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
            self._done = True
            status = _final_status(state, event)
            return [
                job_updated(
                    self.job_id,
                    status,
                    event.ts,
                    stage=Stage.CLEANUP,
                    message=event.reason,
                    exit_code=event.exit_code,
                    completed_at=iso(event.ts),
                )
            ]
        return []

    def _started(self, event: Event) -> list[Request]:
        out: list[Request] = []
        reporting = self.plan.reporting
        metadata = dict(reporting.metadata) if reporting is not None else {}
        if self.plan.variant:  # a sweep point: the dashboard groups the sweep by job name
            metadata["variant"] = self.plan.variant
        gpus = next((u.results.gpus for u in self.plan.units if u.results is not None and u.results.gpus), 0)
        if gpus:  # the dashboard's throughput per GPU (the final `benchmark_results` is the tool's own file)
            metadata["gpus"] = gpus
        if self.user:
            metadata["user"] = self.user
        if self.post_job:
            out.append(
                job_created(
                    self.job_id,
                    job_name=self.plan.name,
                    cluster=reporting.cluster if reporting is not None else None,
                    recipe=self.plan.recipe,
                    submitted_at=event.ts,
                )
            )
        head = next(iter(self.plan.nodes.get("head", ())), "")
        out.append(
            job_updated(
                self.job_id,
                Status.STARTING,
                event.ts,
                stage=Stage.STARTING,
                message=f"Job started on {head}" if head else "Job started",
                started_at=iso(event.ts),
                metadata=metadata,
            )
        )
        return out

    def _unit(self, event: Event) -> list[Request]:
        assert event.unit is not None
        state = UnitState(event.state)
        if self._ending:
            return []
        point = (event.detail or {}).get("result")
        if isinstance(point, dict):
            return [self._result(event.unit, point, event.ts)]
        if state is UnitState.STARTING:
            return self._enter(self._unit_stage.get(event.unit), event.ts)
        if state is UnitState.FAILED and event.unit in self._critical and not self._failed_reported:
            # The failure where it happened; the job's end follows with the exit code.
            self._failed_reported = True
            message = f"{event.unit} failed" + (f": {event.reason}" if event.reason else "")
            return [job_updated(self.job_id, Status.FAILED, event.ts, stage=self._stage, message=message)]
        return []

    def _result(self, unit: str, point: dict[str, object], ts: float) -> Request:
        """Every point so far as `benchmark_results` (the contract replaces it on each PUT)."""
        self._results.append(point)
        results = {"format": 1, "unit": unit, "points": list(self._results)}
        return job_updated(self.job_id, Status.BENCHMARK, ts, stage=self._stage, benchmark_results=results)

    def _enter(self, stage: Stage | None, ts: float) -> list[Request]:
        if stage is None or stage not in self._stages:
            return []
        target = self._stages.index(stage)
        out: list[Request] = []
        while self._entered < target:
            self._entered += 1
            self._stage = self._stages[self._entered]
            status, message = ENTRY[self._stage]
            out.append(job_updated(self.job_id, status, ts, stage=self._stage, message=message))
        return out


def _final_status(state: JobState, event: Event) -> Status:
    """completed, timeout (stopped because its time was up), or failed (everything else)."""
    if state is JobState.SUCCEEDED:
        return Status.COMPLETED
    if state is JobState.CANCELLED and (event.detail or {}).get("time_limit"):
        return Status.TIMEOUT
    return Status.FAILED
