"""`srtd run` on a terminal shows the attach view of the whole run; into a pipe, today's lines."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
from pathlib import Path

from tests.command import SRTD

RECIPE = """\
schema: 2
name: live-run
model: {path: /models/none, container: none, precision: bf16}
resources: {gpu_type: cpu, gpus_per_node: 1}
frontend: {type: none}
observability: {tachometer: {enabled: false}}
services:
  - name: idle
    command: [bash, -c, 'echo ready; exec sleep 30']
    readiness: {log: {pattern: "^ready"}}
benchmark:
  type: custom
  command: "sleep 0.5; echo measured"
"""
LINE = re.compile(r"^\d\d:\d\d:\d\d \[(info|warning|error) *\] ")


def _run(
    tmp: Path, name: str, *, terminal: bool, options: tuple[str, ...] = (), recipe: str = RECIPE
) -> tuple[int, str]:
    (tmp / f"{name}.yaml").write_text(recipe)
    argv = [*SRTD, "run", f"{name}.yaml", "--local", "--log-dir", str(tmp / name), *options]
    env = {**os.environ, "COLUMNS": "150", "LINES": "60", "TERM": "xterm-256color"}
    if not terminal:
        done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=120, check=False)
        return done.returncode, done.stdout + done.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, cwd=tmp, env=env, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            proc.kill()
            raise AssertionError(f"no output for 60 s: {out[-2000:]!r}")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(timeout=30), out.decode(errors="replace")


def _events(log_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (log_dir / "events.jsonl").read_text().splitlines()]


def test_on_a_terminal_the_run_is_the_live_view_and_ends_with_the_summary(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "tty", terminal=True)
    assert code == 0, out
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert "\x1b[" in out  # drawn in place, in colour
    assert "live-run (job local" in plain
    assert "─ events ─" in plain
    assert "service_idle" in plain
    assert "benchmark" in plain
    assert not [line for line in plain.splitlines() if LINE.match(line)]  # not the line stream
    # the last screen is the job's end, then the summary table under it
    assert plain.rindex("job succeeded") < plain.rindex("succeeded, exit code 0")
    assert plain.rstrip().splitlines()[-1].strip().startswith("benchmark")


def test_into_a_pipe_the_run_prints_one_line_per_event_as_before(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "pipe", terminal=False)
    assert code == 0, out
    assert "\x1b[" not in out
    assert "─ events ─" not in out
    lines = [line for line in out.splitlines() if LINE.match(line)]
    assert len(lines) == len(_events(tmp_path / "pipe"))  # every event one line, nothing else of that shape
    assert lines[0].endswith("job starting")
    assert "job succeeded" in lines[-1]


def test_plain_on_a_terminal_is_the_pipe_s_lines_with_no_table_drawn(tmp_path: Path) -> None:
    """`--plain` on a terminal: one line per event, as into a pipe; no startup table drawn in place."""
    slow = RECIPE.replace("echo ready;", "sleep 1.5; echo ready;")  # long enough for the startup table's turn
    code, out = _run(tmp_path, "plain", terminal=True, options=("--plain",), recipe=slow)
    assert code == 0, out
    assert "\x1b[" not in out  # nothing drawn in place (a live table moves the cursor), no colour
    assert "─ events ─" not in out
    assert not re.search(r"^\s*starting\s*$", out, re.MULTILINE)  # the startup table's title
    text = out.replace("\r\n", "\n")
    lines = [line for line in text.splitlines() if LINE.match(line)]
    assert len(lines) == len(_events(tmp_path / "plain"))
    assert lines[0].endswith("job starting")
    assert "job succeeded" in lines[-1]


def test_a_change_held_back_is_drawn_though_no_event_follows(tmp_path: Path) -> None:
    """The run's view draws a change at most every 0.1 s (at once for a job event or a resting
    state): of two units starting together the second one's `starting` is held back, and must
    be drawn once due, not when a unit is ready seconds later (the next event)."""
    from tests.attach.helpers import Terminal

    second = """  - name: idle2
    command: [bash, -c, 'sleep 4; echo ready; exec sleep 30']
    readiness: {log: {pattern: "^ready"}}
benchmark:"""
    slow = RECIPE.replace("echo ready;", "sleep 4; echo ready;").replace("benchmark:", second)
    (tmp_path / "held.yaml").write_text(slow)
    screen = Terminal("run", str(tmp_path / "held.yaml"), "--local", "--log-dir", str(tmp_path / "held"))
    try:
        both = r"service_idle +│ [^│]+│ starting .*\n service_idle2 +│ [^│]+│ starting"
        text = screen.read_until(lambda t: bool(re.search(both, t)), timeout=60)
        assert not re.search(r"│ ready ", text), text  # drawn before the next event (a unit ready)
        screen.read_until(lambda t: "succeeded, exit code 0" in t, timeout=60)
    finally:
        assert screen.close(wait=30) == 0
