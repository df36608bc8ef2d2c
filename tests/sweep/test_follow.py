"""The follow loop against a fake Slurm: the queue bound, retries with exclusion, idempotence."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from pathlib import Path

from srtd.sweep import MANIFEST_NAME, follow
from srtd.sweep._follow import cancel_all, signals_held
from srtd.sweep._view import snapshot
from tests.sweep.fake import CRASHED, MEASURED, FakeQueue, campaign, fresh, lost, points

KEYS = ("a", "b", "c", "d", "e", "f")


def run(tmp_path: Path, queue: FakeQueue, keys: tuple[str, ...] = KEYS, **kw: object) -> dict[str, object]:
    c = campaign(tmp_path, points(*keys, hashes=kw.pop("hashes", None)))  # type: ignore[arg-type]
    follow(
        c,
        queue,
        max_running=int(kw.pop("max_running", 2)),
        retries=int(kw.pop("retries", 1)),
        sleep=lambda _: None,
        **kw,
    )  # type: ignore[arg-type]
    return snapshot(c, 1, final=True)


def statuses(snap: dict[str, object]) -> dict[str, str]:
    return {p["key"]: p["status"] for p in snap["points"]}  # type: ignore[attr-defined,index]


def test_six_points_never_more_than_two_queued_and_each_ends_as_scripted(tmp_path: Path) -> None:
    queue = FakeQueue({"b": [lost("node2"), MEASURED], "c": [CRASHED]})
    snap = run(tmp_path, queue)
    assert queue.most_queued == 2
    assert statuses(snap) == {k: "configuration" if k == "c" else "measured" for k in KEYS}
    # b: infrastructure, resubmitted once excluding the lost node, then measured
    b_jobs = [(job, exclude) for key, job, exclude in queue.submitted if key == "b"]
    assert [e for _, e in b_jobs] == [[], ["node2"]]
    # c: configuration, not retried, with the post-mortem's line
    assert [k for k, _, _ in queue.submitted].count("c") == 1
    c = next(p for p in snap["points"] if p["key"] == "c")  # type: ignore[attr-defined]
    assert c["why"] == "agg_0 exited with code 2 before it was ready"
    assert snap["counts"] == {"measured": 5, "configuration": 1}
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert [j["outcome"] for j in manifest["points"]["b"]["jobs"]] == ["infrastructure", "measured"]
    assert manifest["points"]["b"]["jobs"][0]["blame"] == ["node2"]


def test_retries_are_bounded_and_blame_accumulates(tmp_path: Path) -> None:
    queue = FakeQueue({"a": [lost("n1"), lost("n2"), lost("n3")]})
    snap = run(tmp_path, queue, keys=("a",), retries=2)
    assert [e for _, _, e in queue.submitted] == [[], ["n1"], ["n1", "n2"]]
    assert statuses(snap) == {"a": "infrastructure"}
    # a new run: a fresh budget (the nodes may be back), the point's earlier blame forgotten
    again = FakeQueue({"a": [MEASURED]})
    snap = run(tmp_path, again, keys=("a",), retries=2)
    assert [e for _, _, e in again.submitted] == [[]]
    assert statuses(snap) == {"a": "measured"}


def test_the_same_campaign_again_submits_nothing_and_an_added_point_alone(tmp_path: Path) -> None:
    run(tmp_path, FakeQueue({"c": [CRASHED]}))
    before = (tmp_path / MANIFEST_NAME).read_text()
    again = FakeQueue({})
    run(tmp_path, again)
    assert again.submitted == []
    assert json.loads((tmp_path / MANIFEST_NAME).read_text()) == json.loads(before)
    added = FakeQueue({})
    snap = run(tmp_path, added, keys=(*KEYS, "g"))
    assert [k for k, _, _ in added.submitted] == ["g"]
    assert statuses(snap)["g"] == "measured"


def test_a_changed_recipe_hash_submits_that_point_and_rerun_submits_all(tmp_path: Path) -> None:
    run(tmp_path, FakeQueue({}), keys=("a", "b"))
    changed = FakeQueue({})
    run(tmp_path, changed, keys=("a", "b"), hashes={"b": "h-new"})
    assert [k for k, _, _ in changed.submitted] == ["b"]
    forced = FakeQueue({})
    run(tmp_path, forced, keys=("a", "b"), hashes={"b": "h-new"}, rerun=True)
    assert sorted(k for k, _, _ in forced.submitted) == ["a", "b"]


def test_an_interrupted_follow_leaves_jobs_queued_and_the_next_follows_them(tmp_path: Path) -> None:
    c = campaign(tmp_path, points("a", "b", "c"))
    queue = FakeQueue({})

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(KeyboardInterrupt):
        follow(c, queue, max_running=2, retries=1, sleep=interrupt)
    saved = fresh(tmp_path)
    assert [j.job_id for p in saved.points.values() for j in p.jobs if j.outcome is None] == ["100", "101"]
    snap = run(tmp_path, queue, keys=("a", "b", "c"))  # the same fake Slurm: the jobs go on
    assert [j for _, j, _ in queue.submitted] == ["100", "101", "102"]
    assert statuses(snap) == {"a": "measured", "b": "measured", "c": "measured"}


def test_cancel_ends_the_queued_jobs_and_the_next_run_submits_them_again(tmp_path: Path) -> None:
    c = campaign(tmp_path, points("a", "b"))
    queue = FakeQueue({})
    with contextlib.suppress(KeyboardInterrupt):
        follow(c, queue, max_running=2, retries=1, sleep=lambda _: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert cancel_all(campaign(tmp_path, points("a", "b")), queue) == ["100", "101"]
    snap = run(tmp_path, queue, keys=("a", "b"))
    manifest = fresh(tmp_path)
    assert [j.outcome for j in manifest.points["a"].jobs] == ["cancelled", "measured"]
    assert statuses(snap) == {"a": "measured", "b": "measured"}


def test_signals_during_a_submission_wait_until_it_is_recorded(tmp_path: Path) -> None:
    got: list[int] = []
    old = signal.signal(signal.SIGHUP, lambda s, _: got.append(s))
    try:
        with signals_held():
            # to this thread, whose mask holds it: a process-wide kill could be taken by another
            # thread of the test process (an idle worker thread left by an earlier test)
            signal.pthread_kill(threading.get_ident(), signal.SIGHUP)
            assert got == []  # held: the submission is not cut in half
        assert got == [signal.SIGHUP]  # delivered once it is done
    finally:
        signal.signal(signal.SIGHUP, old)
