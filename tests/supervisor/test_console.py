from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest

from srtd.events import Event
from srtd.launch import FakeLauncher, FakeRun
from srtd.supervisor import JobResult, TerminalConsole, supervise
from srtd.supervisor._console import event_message
from srtd.unit import Plan
from tests.supervisor.test_logic import edge, fu, log_ready

pytestmark = pytest.mark.anyio


async def _run(tmp_path: Path, console: TerminalConsole) -> JobResult:
    units = [
        fu("etcd", readiness=log_ready()),
        fu("w", after=[edge("etcd")]),
        fu("bench", after=[edge("w")], terminal=True),
    ]
    plan = Plan(name="c", job_id="1", log_dir=str(tmp_path), nodes={}, allocation=("n1",), phases=("p",),
                units=tuple(units))  # fmt: skip
    script = {"etcd": FakeRun(lines=((0.4, "ready"),)), "bench": FakeRun(exit_after=0.1, code=2)}
    with anyio.fail_after(10):
        return await supervise(plan, FakeLauncher(script), console=console)


async def test_plain_console_lines_progress_and_summary(tmp_path: Path) -> None:
    out = io.StringIO()
    result = await _run(tmp_path, TerminalConsole(out, tty=False, plain_interval=0.1))
    assert result.exit_code == 2
    text = out.getvalue()
    assert "\x1b[" not in text  # no escapes when not a terminal
    assert "etcd starting" in text
    assert "w waiting" in text
    assert "after='etcd (ready)'" in text
    assert "still starting" in text
    assert "w waiting: after etcd (ready)" in text
    assert "bench failed" in text
    assert "job failed: terminal unit bench exited with exit code 2" in text
    assert "c: failed, exit code 2" in text  # the summary table's title
    assert "restarts" in text


async def test_tty_console_draws_a_live_view(tmp_path: Path) -> None:
    out = io.StringIO()
    result = await _run(tmp_path, TerminalConsole(out, tty=True))
    assert result.exit_code == 2
    text = out.getvalue()
    assert "\x1b[" in text
    assert "waiting on" in text  # the live table's header
    assert "probe log /ready/" in text


class Broken(io.StringIO):
    def write(self, s: str) -> int:
        raise OSError(5, "Input/output error")


async def test_a_console_that_went_away_does_not_stop_the_supervisor(tmp_path: Path) -> None:
    result = await _run(tmp_path, TerminalConsole(Broken(), tty=False, plain_interval=0.05))
    assert result.exit_code == 2


def test_event_messages() -> None:
    exited = Event(seq=3, ts=0, unit="w", state="exited", exit_code=3, reason="boom", attempt=2)
    assert event_message(exited) == ("w exited", {"exit": "exit code 3", "attempt": 2, "reason": "boom"})
    ready = Event(seq=4, ts=0, unit="w", state="ready", detail={"seconds": 1.234})
    assert event_message(ready) == ("w ready after 1.23 s", {})
    job = Event(seq=9, ts=0, state="failed", exit_code=1, reason="w failed: boom")
    assert event_message(job) == ("job failed", {"exit_code": 1, "reason": "w failed: boom"})
    published = Event(
        seq=10, ts=0, state="stopping", reason="publisher pretty: published", detail={"publisher": {"name": "pretty"}}
    )
    assert event_message(published) == ("publisher pretty: published", {})
    skipped = Event(seq=11, ts=0, state="stopping", reason="nothing to publish", detail={"publishers": "skipped"})
    assert event_message(skipped) == ("nothing to publish", {})


def test_a_waiting_unit_with_no_edge_left_waits_for_its_launch() -> None:
    from types import SimpleNamespace

    from srtd.events import UnitState
    from srtd.supervisor._rows import progress_rows

    def runner(name: str, waiting_on: tuple[object, ...]) -> SimpleNamespace:
        unit = SimpleNamespace(on_teardown=False)
        return SimpleNamespace(
            name=name, unit=unit, state=UnitState.WAITING, final=False, waiting_on=waiting_on, launched_at=None
        )

    etcd = edge("etcd")
    rows = progress_rows([runner("w", (etcd,)), runner("v", ())], 0.0, str)  # type: ignore[list-item]
    assert [(r.unit, r.waiting_on) for r in rows] == [("w", "after etcd (ready)"), ("v", "its launch")]


def test_a_stray_is_a_warning_in_its_own_words() -> None:
    reason = "process 7 (sleep 600) outlived unit bench, which left it behind: ending it (SIGKILL)"
    stray = Event(seq=12, ts=0, state="stopping", prev="stopping", reason=reason, detail={"stray": {"pid": 7}})
    assert event_message(stray) == (reason, {})
    out = io.StringIO()
    console = TerminalConsole(out, tty=False)
    console.event(stray)
    console.close()
    assert "[warning  ] " + reason in out.getvalue()
