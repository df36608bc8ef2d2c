"""The event -> status fold: stages in the contract's order, failures, the end."""

from __future__ import annotations

from dataclasses import replace

from srtd.events import Event
from srtd.reporting import StageFold
from srtd.unit import Plan, ResultsSpec, StatusReporting, Unit, UnitKind
from tests.reporting import EVERY_STAGE

SETTINGS = StatusReporting(
    endpoints=("http://c",), job_id_prefix="lab:", cluster="lab", metadata={"head_node": "n1", "log_dir": "/l"}
)


def unit(name: str, phase: str, kind: UnitKind = UnitKind.SERVICE, critical: bool = True) -> Unit:
    return Unit(name=name, kind=kind, phase=phase, nodes=("n1",), argv=("true",), log=f"{name}.log", critical=critical)


def plan(*units: Unit, local: bool = True) -> Plan:
    return Plan(
        name="job",
        recipe="r.yaml",
        job_id="42",
        local=local,
        log_dir="/l",
        nodes={"head": ("n1",)},
        allocation=("n1",),
        phases=("infra", "before_workers", "workers", "frontend", "after_frontend", "benchmark"),
        units=units,
        reporting=SETTINGS,
    )


FULL = plan(
    unit("etcd", "infra"),
    unit("prefill_0", "workers", UnitKind.WORKER),
    unit("decode_0", "workers", UnitKind.WORKER),
    unit("frontend_0", "frontend", UnitKind.FRONTEND),
    unit("watcher", "after_frontend", critical=False),
    unit("benchmark", "benchmark", UnitKind.BENCHMARK),
)


class Feed:
    def __init__(self, fold: StageFold) -> None:
        self.fold = fold
        self.seq = 0
        self.sent: list[tuple[str, str, dict[str, object]]] = []

    def __call__(self, unit: str | None, state: str, prev: str | None = "x", **fields: object) -> None:
        self.seq += 1
        event = Event(seq=self.seq, ts=1_700_000_000.0 + self.seq, unit=unit, state=state, prev=prev, **fields)
        self.sent += [(r.method, r.path, r.body) for r in self.fold.feed(event)]

    def statuses(self) -> list[tuple[str, str | None]]:
        return [(b["status"], b.get("stage")) for m, _, b in self.sent if m == "PUT"]  # type: ignore[misc]


def start_all(feed: Feed) -> None:
    feed(None, "starting", prev=None)
    for name in ("etcd", "prefill_0", "decode_0", "frontend_0", "watcher", "benchmark"):
        feed(name, "waiting")
    for name in ("etcd", "prefill_0", "decode_0", "frontend_0", "watcher"):
        feed(name, "starting", pid=1)
        feed(name, "ready")
    feed(None, "running")
    feed("benchmark", "starting", pid=2)


def test_a_job_that_succeeds_reports_each_stage_once_in_order_then_completed() -> None:
    feed = Feed(StageFold(FULL, post_job=True))
    start_all(feed)
    feed("prefill_0", "exited", exit_code=1)  # a restart does not rewind the stage
    feed("prefill_0", "starting", attempt=1)
    feed("benchmark", "stopped", exit_code=0)
    feed(None, "stopping", reason="every terminal unit exited 0")
    feed("etcd", "stopping")
    feed("etcd", "stopped")
    feed(None, "succeeded", exit_code=0, reason="every terminal unit exited 0")
    feed(None, "succeeded", exit_code=0)  # nothing after the end
    assert feed.sent[0][:2] == ("POST", "/api/jobs")
    assert feed.sent[0][2] == {
        "job_id": "lab:42",
        "job_name": "job",
        "cluster": "lab",
        "recipe": "r.yaml",
        "submitted_at": "2023-11-14T22:13:21+00:00",
        "metadata": {},
    }
    assert {p for m, p, _ in feed.sent[1:]} == {"/api/jobs/lab:42"}
    assert feed.statuses() == EVERY_STAGE
    started = feed.sent[1][2]
    assert started["message"] == "Job started on n1"
    assert started["metadata"] == {"head_node": "n1", "log_dir": "/l"}
    assert started["started_at"] == started["updated_at"] == "2023-11-14T22:13:21+00:00"
    assert [b.get("message") for _, _, b in feed.sent[2:6]] == [
        "Starting infrastructure services",
        "Starting workers",
        "Starting frontend",
        "Running benchmark",
    ]
    end = feed.sent[-1][2]
    assert (end["exit_code"], end["message"]) == (0, "every terminal unit exited 0")
    assert end["completed_at"] == end["updated_at"]


def test_a_later_stage_entered_first_reports_the_skipped_ones_before_it() -> None:
    feed = Feed(StageFold(FULL))
    feed(None, "starting", prev=None)
    feed("frontend_0", "starting")
    feed("prefill_0", "starting")
    assert feed.statuses() == [
        ("starting", "starting"),
        ("starting", "head_infrastructure"),
        ("workers", "workers"),
        ("frontend", "frontend"),
    ]
    assert all(m == "PUT" for m, _, _ in feed.sent)  # no POST without post_job


def test_stages_the_plan_lacks_are_never_reported() -> None:
    feed = Feed(StageFold(plan(unit("agg_0", "workers", UnitKind.WORKER), unit("svc", "after_frontend"))))
    feed(None, "starting", prev=None)
    feed("agg_0", "starting")
    feed("svc", "starting")  # a sidecar enters no stage of its own
    feed(None, "stopping")
    feed(None, "succeeded", exit_code=0)
    assert feed.statuses() == [("starting", "starting"), ("workers", "workers"), ("completed", "cleanup")]


def test_a_critical_failure_is_reported_where_it_happened_then_the_exit_code() -> None:
    feed = Feed(StageFold(FULL))
    feed(None, "starting", prev=None)
    feed("etcd", "starting")
    feed("etcd", "ready")
    feed("prefill_0", "starting")
    feed("watcher", "failed", reason="not critical")  # recorded by the job, not reported
    feed("prefill_0", "failed", exit_code=3, reason="exited with exit code 3 before it was ready")
    feed(None, "stopping", reason="prefill_0 failed")
    feed("decode_0", "failed")  # teardown casualties are not news
    feed(None, "failed", exit_code=1, reason="prefill_0 failed: exited with exit code 3 before it was ready")
    assert feed.statuses()[-2:] == [("failed", "workers"), ("failed", "cleanup")]
    assert feed.sent[-2][2]["message"] == "prefill_0 failed: exited with exit code 3 before it was ready"
    assert feed.sent[-1][2]["exit_code"] == 1


def test_a_cancelled_job_ends_failed_with_its_signal_exit_code() -> None:
    feed = Feed(StageFold(FULL))
    feed(None, "starting", prev=None)
    feed("etcd", "starting")
    feed(None, "stopping", reason="SIGTERM")
    feed("prefill_0", "starting")  # nothing is entered once the job stops
    feed(None, "cancelled", exit_code=143, reason="stopped by SIGTERM")
    assert feed.statuses() == [("starting", "starting"), ("starting", "head_infrastructure"), ("failed", "cleanup")]
    assert (feed.sent[-1][2]["exit_code"], feed.sent[-1][2]["message"]) == (143, "stopped by SIGTERM")


def test_a_job_stopped_because_its_time_was_up_ends_as_timeout() -> None:
    feed = Feed(StageFold(FULL))
    feed(None, "starting", prev=None)
    feed(None, "stopping", reason="early warning")
    reason = "received SIGUSR1 90 s before the time limit: Slurm's early warning (--signal=B:USR1@90)"
    feed(None, "cancelled", exit_code=138, reason=reason, detail={"time_limit": True})
    assert feed.statuses()[-1] == ("timeout", "cleanup")
    assert (feed.sent[-1][2]["exit_code"], feed.sent[-1][2]["message"]) == (138, reason)


def test_each_result_point_is_sent_as_benchmark_results_with_every_point_so_far() -> None:
    feed = Feed(StageFold(FULL))
    start_all(feed)
    feed("benchmark", "stopped", exit_code=0)
    before = len(feed.sent)
    first, second = {"concurrency": 1, "output_tok_s": 10.0}, {"concurrency": 4, "output_tok_s": 35.5}
    feed("benchmark", "stopped", prev="stopped", detail={"result": first, "point": 0})
    feed("benchmark", "stopped", prev="stopped", detail={"result": second, "point": 1})
    feed(None, "stopping", reason="every terminal unit exited 0")
    feed(None, "succeeded", exit_code=0)
    sent = [b for _, _, b in feed.sent[before:]]
    assert [(b["status"], b["stage"]) for b in sent[:2]] == [("benchmark", "benchmark"), ("benchmark", "benchmark")]
    assert sent[0]["benchmark_results"] == {"format": 1, "unit": "benchmark", "points": [first]}
    assert sent[1]["benchmark_results"] == {"format": 1, "unit": "benchmark", "points": [first, second]}
    assert "benchmark_results" not in sent[2]  # the final PUT keeps what the last one set
    assert sent[2]["status"] == "completed"


def test_the_started_metadata_names_the_serving_gpus_the_dashboard_divides_by() -> None:
    bench = replace(
        unit("benchmark", "benchmark", UnitKind.BENCHMARK),
        results=ResultsSpec(reader="srtd", path="benchmark.json", gpus=8),
    )
    feed = Feed(StageFold(plan(unit("etcd", "infra"), bench), post_job=True))
    feed(None, "starting", prev=None)
    assert feed.sent[1][2]["metadata"] == {"head_node": "n1", "log_dir": "/l", "gpus": 8}
