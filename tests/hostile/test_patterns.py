"""Log patterns cannot hold the job: they run in linear time (RE2), and what RE2 cannot run
is refused at load with its place in the recipe (srtd/patterns.py, docs/recipe.md#log-patterns)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from srtd.patterns import compile_log_pattern
from tests.command import reap, start_srtd
from tests.hostile.helpers import bounded, one_line
from tests.supervisor.helpers import assert_no_leftovers

# `(a+)+$` against a's ending in b: Python's `re` tries 2**40 ways to split the a's.
BAIT_LINE = "a" * 40 + "b"


def recipe(unit_program: str, patterns: str, health: str = '{log: {pattern: "^ready$"}}') -> str:
    return f"""schema: 2
name: bait
model: {{path: "hf:srtd/toy", container: toy, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 1}}
engine:
  type: custom
  command: ["python3", "-c", {unit_program!r}]
  health: {health}
roles:
  agg: {{nodes: 1, workers: 1, gpus: 1}}
frontend: {{type: none}}
observability: {{tachometer: {{enabled: false}}}}
health_check:
  extra_fatal_log_patterns: {patterns}
"""


@pytest.mark.slow
def test_a_backtracking_pattern_does_not_hold_the_job_and_sigterm_ends_it(tmp_path: Path) -> None:
    token = f"srtdtest-{uuid.uuid4().hex}"
    program = f"import time  # {token}\nprint({BAIT_LINE!r}, flush=True)\nprint('ready', flush=True)\ntime.sleep(600)"
    path = tmp_path / "bait.yaml"
    path.write_text(recipe(program, '["(a+)+$"]'))
    log_dir = tmp_path / "logs"
    proc = start_srtd("run", str(path), "--local", "--log-dir", str(log_dir), "--plain", cwd=tmp_path)
    try:
        log = log_dir / "workers" / "node1_agg_w0.out"
        deadline = time.monotonic() + 60
        while not (log.exists() and "ready" in log.read_text()):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the unit never printed `ready`"
            time.sleep(0.1)
        time.sleep(1)  # the watcher has read the bait line by now (it is written before `ready`)
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("srtd did not obey SIGTERM within 30 s (a log pattern holds its task)")
        assert proc.returncode == 128 + signal.SIGTERM, out
        assert "fatal log line" not in out  # the bait does not match: `(a+)+$` needs the a's at the end
    finally:
        reap(proc)
    assert_no_leftovers(token)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(a)\\\\1", "invalid escape sequence: \\1"),
        ("^x(?!0)", "invalid perl operator: (?!"),
        ("(", "missing ): ("),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_at_load_with_its_place(tmp_path: Path, pattern: str, why: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe("print(1)", f'["ok", "{pattern}"]'))
    result = bounded("validate", str(path), cwd=tmp_path)
    assert result.code == 2
    assert one_line(result.stderr) == (
        f"{path}:14:36 health_check.extra_fatal_log_patterns.1: is not a log pattern srtd can use "
        f"(RE2 syntax: no backreferences, no lookaround): {why}"
    )


def test_a_log_probe_pattern_is_checked_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe("print(1)", "[]", health='{log: {pattern: "(?<=x)ready"}}'))
    result = bounded("validate", str(path), cwd=tmp_path)
    assert result.code == 2
    assert one_line(result.stderr).startswith(f"{path}:8:")
    assert "engine.health.log.pattern: is not a log pattern srtd can use" in result.stderr


def test_every_engines_own_fatal_pattern_is_one_re2_runs() -> None:
    import srtd.engines  # noqa: F401  (registers the engine rows)
    from srtd.engines import _base

    for row in _base.all_rows():
        for pattern in row.fatal_patterns:
            compile_log_pattern(pattern)  # raises ValueError for one RE2 refuses


def test_a_saved_plan_with_a_pattern_re2_cannot_run_is_refused_before_run_starts_anything(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe("print(1)", "[]"))
    planned = bounded("plan", str(path), "--local", "--json", "--log-dir", str(tmp_path / "logs"), cwd=tmp_path)
    assert planned.code == 0, planned.stderr
    plan = json.loads(planned.stdout)
    plan["units"][0]["fatal_patterns"] = ["ok", "(?<!x)y"]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    result = bounded("run", str(tmp_path / "plan.json"), cwd=tmp_path)
    assert result.code == 2
    assert one_line(result.stderr) == ("srtd: unit 'agg_0_node1': bad pattern '(?<!x)y': invalid perl operator: (?<!")
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["plan.json"]  # no journal, no unit log
