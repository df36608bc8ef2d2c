"""What a unit left outside its process group (a stray, found by the launcher) is journaled as
a job event once every unit is down and before the host teardown steps run; it changes no
exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from srtd.events import JobState
from srtd.launch import FakeRun, Stray
from tests.supervisor.test_hosts_logic import READY, first_of, job, last_of, teardown_steps
from tests.supervisor.test_logic import go

pytestmark = pytest.mark.anyio

STRAY = Stray(pid=4242, command="sleep 600", unit="bench", grace=30.0)


async def test_a_stray_is_journaled_after_the_units_and_before_the_teardown_steps(tmp_path: Path) -> None:
    script = {"w0": READY, "bench": FakeRun(exit_after=1.0), "host_teardown_n1": FakeRun(exit_after=1.0)}
    run = await go(tmp_path, job([], teardown_steps()), script, strays=[STRAY], default=FakeRun(exit_after=1.0))
    assert run.result.exit_code == 0
    assert run.result.state is JobState.SUCCEEDED
    found = [i for i, e in enumerate(run.events) if e.detail and "stray" in e.detail]
    assert len(found) == 1
    event = run.events[found[0]]
    assert (event.unit, event.state, event.prev) == (None, "stopping", "stopping")
    assert event.detail == {"stray": {"pid": 4242, "command": "sleep 600", "unit": "bench", "grace": 30.0}}
    assert event.reason == (
        "process 4242 (sleep 600) outlived unit bench, which left it behind: "
        "ending it (SIGTERM, then SIGKILL after 30 s)"
    )
    assert last_of(run, "w0", "bench") < found[0] < first_of(run, "host_teardown_n1", "host_teardown_n2")
    # once before the teardown steps, once after them (what a step left)
    assert len(run.launcher.strays_ended_at) == 2


async def test_a_job_without_teardown_steps_ends_its_strays_once(tmp_path: Path) -> None:
    run = await go(tmp_path, job([], []), {"w0": READY, "bench": FakeRun(exit_after=1.0)}, strays=[STRAY])
    assert run.result.exit_code == 0
    assert [e.detail["stray"]["pid"] for e in run.events if e.detail and "stray" in e.detail] == [4242]
    assert len(run.launcher.strays_ended_at) == 1
    assert run.states(None) == ["starting", "running", "stopping", "stopping", "succeeded"]
