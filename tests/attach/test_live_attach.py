"""`srtd attach` on a terminal (the live view, not --once) of a real job."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from srtd.errors import EXIT_INTERRUPTED
from tests.attach.helpers import JobProcess, Terminal, srtd
from tests.supervisor.helpers import PlanMaker

pytestmark = pytest.mark.slow


def _last_screen(text: str, title: str) -> str:
    return text[text.rindex(title) :] if title in text else ""


def test_attach_to_a_quiet_job_shows_it_as_it_is_without_waiting_for_an_event(maker: PlanMaker, runtime: Path) -> None:
    """The journal's replay is drawn once applied: a job whose units are all ready and idle
    shows `running` and `ready` at once, though no event comes after the attach."""
    for name in ("etcd", "worker", "router"):
        maker.unit(name)
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        job.socket()
        before = job.wait_for(lambda es: sum(e.state == "ready" for e in es) == 3 and es[-1].state == "running")
        title = "test (job local-1): running"
        screen = Terminal("attach", "local-1")
        try:
            text = screen.read_until(lambda t: len(re.findall(r"\bready\b", _last_screen(t, title))) >= 3)
            screen.proc.send_signal(signal.SIGINT)  # Ctrl-C leaves the view; the job goes on
            screen.read_until(lambda t: "srtd: interrupted" in t)
        finally:
            assert screen.close(wait=30) == EXIT_INTERRUPTED
        assert "Traceback" not in screen.text
        assert len(job.events()) == len(before)  # nothing came after the attach: the screen is the replay's
        last = _last_screen(text, title)
        for name in ("etcd", "worker", "router"):
            assert re.search(rf"^ {name} +│ node0 +│ ready ", last, re.MULTILINE), last
        assert "pending" not in last
        assert job.proc.poll() is None
        assert srtd("stop", "local-1", "--wait").returncode == 0
        assert job.finish()[0] == 143
    finally:
        job.kill()
