"""The campaign's views: the JSON snapshot, a rendered frame of the live table, the piped lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from srtd.sweep import SweepView, follow, frame, snapshot
from tests.sweep.fake import CRASHED, FakeQueue, campaign, lost, points


def _ended(tmp_path: Path) -> tuple[object, FakeQueue]:
    c = campaign(tmp_path, points("a", "b", "c"))
    queue = FakeQueue({"b": [lost("node2"), lost("node3")], "c": [CRASHED]})
    follow(c, queue, max_running=2, retries=1, sleep=lambda _: None)
    return c, queue


def test_the_json_snapshot_says_each_point_its_job_and_why(tmp_path: Path) -> None:
    c, _ = _ended(tmp_path)
    snap = snapshot(c, 1, final=True)  # type: ignore[arg-type]
    assert json.loads(json.dumps(snap)) == snap
    assert snap["counts"] == {"measured": 1, "infrastructure": 1, "configuration": 1}
    by = {p["key"]: p for p in snap["points"]}
    assert (by["a"]["status"], by["a"]["why"], by["a"]["retried"]) == ("measured", None, 0)
    assert by["b"]["status"] == "infrastructure"
    assert by["b"]["exclude"] == ["node2"]
    assert by["b"]["retried"] == 1
    assert by["b"]["why"] == "agg_0 failed: node node3 lost (x)"
    assert by["c"]["why"] == "agg_0 exited with code 2 before it was ready"
    assert snap["final"] is True
    assert snap["campaign"] == tmp_path.name


def test_a_rendered_frame_lists_every_point_with_its_status(tmp_path: Path) -> None:
    c, _ = _ended(tmp_path)
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(frame(snapshot(c, 1)))  # type: ignore[arg-type]
    text = out.getvalue()
    assert f"sweep {tmp_path.name}: 1 configuration, 1 infrastructure, 1 measured" in text
    rows = {
        line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
        for line in text.splitlines()
        if line.startswith("│ ")
    }
    assert rows["a"][:3] == ["measured", rows["a"][1], "0"]
    assert rows["c"][0] == "configuration"
    assert rows["c"][3].startswith("agg_0 exited with code 2")
    assert rows["b"][0] == "infrastructure"
    assert rows["b"][2] == "1"


def test_json_mode_prints_a_snapshot_per_change_and_piped_mode_a_line_per_point_change(tmp_path: Path) -> None:
    lines: list[str] = []
    view = SweepView(Console(file=io.StringIO()), 1, as_json=True, live=False, echo=lines.append)
    c = campaign(tmp_path, points("a"))
    follow(c, FakeQueue({}, passes=1), max_running=1, retries=1, show=view, sleep=lambda _: None)
    view.close(c)
    docs = [json.loads(line) for line in lines]
    assert [d["points"][0]["status"] for d in docs] == ["submitted", "running", "measured", "measured"]
    assert [d["final"] for d in docs] == [False, False, False, True]
    piped: list[str] = []
    view = SweepView(Console(file=io.StringIO()), 1, as_json=False, live=False, echo=piped.append)
    c = campaign(tmp_path / "other", points("a"))
    (tmp_path / "other").mkdir(exist_ok=True)
    follow(c, FakeQueue({}, passes=1), max_running=1, retries=1, show=view, sleep=lambda _: None)
    assert piped == ["a: submitted (job 100)", "a: running (job 100)", "a: measured (job 100)"]
