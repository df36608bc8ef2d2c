"""The attach view, the replay and the timeline, rendered headless (rich console capture)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from srtd.attach._protocol import snapshot_message, view_of
from srtd.attach._timeline import Link, TierStop, build, render_timeline, svg_text, write_svg
from srtd.attach._view import LiveView, render_view
from srtd.events import Event, JobView
from srtd.supervisor import read_journal
from tests.attach.helpers import srtd

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent / "golden"
REGEN = bool(os.environ.get("SRTD_REGEN_GOLDEN"))


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times in the views are local; the goldens are in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def events() -> list[Event]:
    return read_journal(DATA / "example.jsonl")


def capture(renderable: object, width: int = 140) -> str:
    console = Console(record=True, width=width, file=open(os.devnull, "w"), highlight=False)  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_the_live_view_draws_the_replay_once_applied_and_a_burst_s_last_event_when_quiet(
    events: list[Event],
) -> None:
    """No empty screen before the replay is applied; the last event of a burst is drawn when the
    stream goes quiet, not when (if ever) the next event comes."""
    order = ["etcd", "w0", "bench"]
    out = io.StringIO()
    screen = LiveView(Console(file=out, width=140, force_terminal=True), order, replayed=3, refresh=3600)
    for event in events[:2]:
        screen.take({"type": "event", "event": json.loads(event.to_line())})
    assert out.getvalue() == ""  # still replaying
    screen.take({"type": "event", "event": json.loads(events[2].to_line())})
    assert f"#{events[2].seq} " in out.getvalue()  # the replay's end, drawn at once
    for event in events[3:]:  # a burst: within `refresh`, not drawn yet
        screen.take({"type": "event", "event": json.loads(event.to_line())})
    assert "succeeded" not in out.getvalue()
    screen.take(None)
    assert "demo (job 4242): succeeded, exit code 0" in out.getvalue()
    drawn = out.getvalue()
    screen.take(None)  # nothing new: nothing drawn
    assert out.getvalue() == drawn
    screen.close()


def test_the_view_of_a_finished_job(events: list[Event]) -> None:
    order = ["etcd", "w0", "bench"]
    text = capture(render_view(JobView.fold(events, order), events, order))
    golden("view.txt", text)
    assert "demo (job 4242): succeeded, exit code 0" in text
    assert " w0    │ node1 │ stopped │ 9050       │ 1        │ 3.1 s       │ killed by SIGTERM │" in text
    assert "#21 job succeeded  exit_code=0 reason=every terminal unit exited 0" in text
    assert "#9 " not in text  # the pane keeps the last 12 events


def test_a_snapshot_message_carries_exactly_the_fold(events: list[Event]) -> None:
    view = JobView.fold(events[:9], ["etcd", "w0", "bench"])
    message = json.loads(json.dumps(snapshot_message(view, ["etcd", "w0", "bench"], phases={"all": []})))
    assert [u["name"] for u in message["units"]] == ["etcd", "w0", "bench"]
    assert message["units"][1]["waiting_on"] == []
    assert message["units"][2]["waiting_on"] == ["w0 (ready)"]
    assert message["units"][1]["log"] == "/logs/w0.log"
    assert view_of(message) == view


def test_the_timeline_finds_the_critical_chain_and_the_teardown_by_tier(events: list[Event]) -> None:
    line = build(events)
    assert (line.state, line.duration, line.running) == ("succeeded", 75.91, 14.11)
    assert line.chain == [
        Link(unit="etcd", after=None, waited=0.0, launched=0.02, ready=0.35, took=0.33),
        Link(unit="w0", after="etcd (ready)", waited=0.34, launched=0.36, ready=14.1, took=3.09),
        Link(unit="bench", after="w0 (ready)", waited=14.09, launched=14.11, ready=14.11, took=0.0),
    ]
    assert line.teardown == [TierStop(0, 74.21, 75.8, ["w0"]), TierStop(2, 75.81, 75.9, ["etcd"])]
    assert [(u.name, u.restarts, u.final) for u in line.units] == [
        ("etcd", 0, "stopped"),
        ("w0", 1, "stopped"),
        ("bench", 0, "stopped"),
    ]
    w0 = line.units[1]
    assert [s.state for s in w0.segments] == [
        "waiting", "starting", "exited", "backoff", "starting", "ready", "stopping", "stopped",
    ]  # fmt: skip
    golden("timeline.txt", capture(render_timeline(line, width=40)))


def test_each_state_of_the_timeline_s_legend_has_a_colour_of_its_own(events: list[Event]) -> None:
    """In the SVG (rich's export: each text run's class has a CSS fill), every state of the
    legend is drawn in a fill no other state has; exited, backoff and failed were all red."""
    svg = svg_text(build(events))
    fills = dict(re.findall(r"\.(terminal-\d+-r\d+) \{ fill: (#[0-9a-f]{6})", svg))
    legend = re.findall(r'<text class="([^"]+)"[^>]*>█</text><text [^>]*>&#160;([a-z]+)&#160;', svg)
    by_state = {state: fills[css] for css, state in legend}
    states = ["waiting", "starting", "ready", "exited", "backoff", "stopping", "failed"]
    assert list(by_state) == states
    assert len(set(by_state.values())) == len(states), by_state


def test_the_timeline_picture_is_an_svg(events: list[Event], tmp_path: Path) -> None:
    path = write_svg(build(events), tmp_path / "timeline.svg")
    svg = path.read_text().replace("&#160;", " ")
    assert svg.startswith("<svg")
    assert ">srtd timeline: demo (job 4242)</text>" in svg
    assert "critical chain" in svg
    assert "tier 2: +75.81 s .. +75.90 s (0.09 s): etcd" in svg


def test_replay_and_timeline_commands(tmp_path: Path) -> None:
    shutil.copy(DATA / "example.jsonl", tmp_path / "events.jsonl")
    once = srtd("attach", "--replay", str(tmp_path), "--once", "--json")
    assert once.returncode == 0, once.stderr
    final = json.loads(once.stdout)
    assert (final["state"], final["seq"], [u["restarts"] for u in final["units"]]) == ("succeeded", 21, [0, 1, 0])
    stream = srtd("attach", "--replay", str(tmp_path), "--json")
    assert [Event.from_line(line + "\n") for line in stream.stdout.splitlines()] == read_journal(DATA / "example.jsonl")
    assert [json.loads(line)["seq"] for line in stream.stdout.splitlines()] == list(range(1, 22))
    timeline = srtd("timeline", str(tmp_path), "--json")
    assert timeline.returncode == 0, timeline.stderr
    data = json.loads(timeline.stdout)
    assert data["svg"] == str(tmp_path / "timeline.svg")
    assert [link["unit"] for link in data["chain"]] == ["etcd", "w0", "bench"]
    assert (tmp_path / "timeline.svg").read_text().startswith("<svg")
    missing = srtd("timeline", str(tmp_path / "nowhere"))
    assert missing.returncode == 4
    assert missing.stderr.startswith(f"srtd: {tmp_path / 'nowhere' / 'events.jsonl'}: no journal")
    both = srtd("attach", "job", "--replay", str(tmp_path))
    assert (both.returncode, both.stderr) == (4, "srtd: give either JOB or --replay LOG_DIR, not both\n")
