"""Results of real local toy jobs: a three-point sweep through `srtd results`, and the gate."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest

from srtd.errors import EXIT_NO_RESULTS
from srtd.events import Event
from tests.command import run_srtd

REPO = Path(__file__).resolve().parents[2]
SWEEP = REPO / "recipes" / "features" / "results-sweep.yaml"
LEVELS = (1, 4, 16)

pytestmark = pytest.mark.slow


def srtd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_srtd(*args, timeout=timeout)


OUTPUT: dict[Path, str] = {}  # what `srtd run` printed, per log dir


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("sweep")
    dirs = []
    for level in LEVELS:
        log_dir = root / f"c{level}"
        done = srtd("run", str(SWEEP), "--variant", f"concurrency={level}", "--log-dir", str(log_dir))
        assert done.returncode == 0, done.stdout + done.stderr
        OUTPUT[log_dir] = done.stdout + done.stderr
        dirs.append(log_dir)
    return dirs


def test_three_sweep_points_give_three_rows_equal_to_the_benchmarks_files(sweep: list[Path]) -> None:
    done = srtd("results", *map(str, reversed(sweep)), "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert [r["concurrency"] for r in rows] == list(LEVELS)  # sorted, whatever the order given
    assert [r["sweep"] for r in rows] == [{"concurrency": str(c)} for c in LEVELS]
    for row, log_dir in zip(rows, sweep, strict=True):
        own = json.loads((log_dir / "benchmark.json").read_text())
        assert row["requests_sent"] == own["requests"] == 32
        assert row["requests_succeeded"] == own["succeeded"]
        assert row["requests_failed"] == own["errors"] == 0
        assert row["duration_s"] == own["duration_s"]
        assert row["output_tokens"] == own["output_tokens"]
        assert row["output_tok_s"] == own["output_tokens_per_s"]
        assert row["output_tok_s_per_gpu"] == round(own["output_tokens_per_s"] / 2, 3)  # 2 workers x 1 GPU
        assert row["ttft_ms"] == {
            "mean": own["ttft_ms"]["avg"],
            "p50": own["ttft_ms"]["p50"],
            "p99": own["ttft_ms"]["p99"],
        }
        assert row["tpot_ms"]["p50"] == own["tpot_ms"]["p50"]
        assert row["e2e_ms"]["p99"] == own["latency_ms"]["p99"]
    # the human table: one line per point, the sweep's parameter as a column
    table = srtd("results", *map(str, sweep))
    assert table.returncode == 0, table.stderr
    lines = [line for line in table.stdout.splitlines() if line.startswith(" local-")]
    assert len(lines) == 3
    for line, row in zip(lines, rows, strict=True):
        cells = [c.strip() for c in line.split("│")]
        assert cells[1] == str(row["concurrency"])  # a swept concurrency is the concurrency column
        assert cells[2] == "32/32"
        assert cells[5] == f"{row['output_tok_s']:.1f}"


def test_the_journal_and_the_summary_carry_each_point(sweep: list[Path]) -> None:
    events = [Event.from_line(line) for line in (sweep[0] / "events.jsonl").read_text().splitlines()]
    results = [e for e in events if e.detail and "result" in e.detail]
    assert len(results) == 1
    (event,) = results
    # The results watch reads benchmark.json when it appears: before or after the client's
    # exit is decided, so the event repeats the unit's state of that moment (no transition).
    assert (event.unit, event.prev) == ("benchmark", event.state)
    assert event.state in ("ready", "stopped")
    stored = json.loads((sweep[0] / "results.json").read_text())
    assert stored["format"] == 1
    assert stored["verdict"] == {"ok": True, "gated": True, "reason": None, "point": None}
    assert event.detail is not None
    assert event.detail["result"]["output_tokens"] == stored["points"][0]["output_tokens"]
    assert events.index(event) < next(i for i, e in enumerate(events) if e.unit is None and e.state == "stopping")
    # the end-of-run summary: the units' table, then the results table under it
    printed = OUTPUT[sweep[0]].splitlines()
    summary = next(i for i, line in enumerate(printed) if "toy-results-sweep: succeeded, exit code 0" in line)
    title = next(i for i, line in enumerate(printed) if line.strip() == "benchmark results")
    assert title > summary
    row = [c.strip() for c in printed[title + 3].split("│")]
    assert row[:2] == ["1", "32/32"]
    replay = srtd("attach", "--replay", str(sweep[0]))
    assert replay.returncode == 0, replay.stderr
    ok = f"{stored['points'][0]['requests_succeeded']}/32"
    assert f"#{event.seq} benchmark result  concurrency=1 ok={ok} tok/s=" in replay.stdout


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_writes_png_and_svg_of_the_expected_size(sweep: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png, svg = tmp_path / "pareto.png", tmp_path / "pareto.svg"
    for target in (png, svg):
        done = srtd("results", *map(str, sweep), "--plot", str(target))
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == f"plot written to {target}"
    assert _png_size(png) == (1200, 500)
    text = svg.read_text()
    assert text.startswith("<?xml")
    assert "<svg" in text
    assert 'width="864pt" height="360pt"' in text  # 12 x 5 inches at 72 pt per inch


GATE_RECIPE = """\
schema: 2
name: gate
model: {{path: "hf:srtd/toy", container: toy, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 1}}
engine: {{type: toy, token_latency_ms: 1}}
roles: {{agg: {{nodes: 1, workers: 1, gpus: 1}}}}
frontend: {{type: toy-router, enable_multiple_frontends: false}}
observability: {{tachometer: {{enabled: false}}}}
benchmark:
  type: custom
  command: {command}
  results_file: {results_file}
  accept_empty: {accept_empty}
"""
EMPTY = {"concurrency": 4, "requests": 20, "succeeded": 0, "errors": 20, "output_tokens": 0}


def _gate_job(
    tmp_path: Path, write: bool, accept_empty: bool, *extra: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    log_dir = tmp_path / "logs"
    out = log_dir / "measured.json"
    command = f"echo '{json.dumps(EMPTY)}' > {out}" if write else "echo measured nothing"
    recipe = tmp_path / "gate.yaml"
    recipe.write_text(
        GATE_RECIPE.format(command=json.dumps(command), results_file="measured.json", accept_empty=accept_empty)
    )
    return srtd("run", str(recipe), "--log-dir", str(log_dir), *extra), log_dir


def _final(log_dir: Path) -> Event:
    return Event.from_line((log_dir / "events.jsonl").read_text().splitlines()[-1])


def test_a_benchmark_with_zero_successful_requests_fails_the_job(tmp_path: Path) -> None:
    done, log_dir = _gate_job(tmp_path, write=True, accept_empty=False)
    assert done.returncode == EXIT_NO_RESULTS == 5, done.stdout + done.stderr
    final = _final(log_dir)
    reason = "the benchmark measured nothing: concurrency 4: 0 of 20 requests succeeded"
    assert (final.state, final.exit_code, final.reason) == ("failed", 5, reason)
    assert final.detail is not None
    assert final.detail["culprit"] == "benchmark"
    assert final.detail["point"]["requests_succeeded"] == 0
    postmortem = (log_dir / "postmortem.txt").read_text()
    assert reason in postmortem
    stored = json.loads((log_dir / "results.json").read_text())
    assert stored["verdict"] == {"ok": False, "gated": True, "reason": reason, "point": 0}


def test_accept_empty_lets_the_same_job_succeed(tmp_path: Path) -> None:
    done, log_dir = _gate_job(tmp_path, True, True, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for line in lines[:-1]:
        Event.from_line(line)  # every line before the summary is still an event
    summary = json.loads(lines[-1])
    assert summary["summary"] == "gate: succeeded, exit code 0"
    assert summary["results"] == [json.loads((log_dir / "results.json").read_text())]
    assert (_final(log_dir).state, _final(log_dir).exit_code) == ("succeeded", 0)
    assert json.loads((log_dir / "results.json").read_text())["verdict"]["gated"] is False


def test_a_benchmark_that_writes_no_result_fails_the_same_way(tmp_path: Path) -> None:
    done, log_dir = _gate_job(tmp_path, write=False, accept_empty=False)
    assert done.returncode == EXIT_NO_RESULTS, done.stdout + done.stderr
    final = _final(log_dir)
    assert final.reason == f"the benchmark measured nothing: no results at {log_dir / 'measured.json'}"
    assert final.exit_code == 5


def test_a_custom_benchmark_without_results_file_is_not_gated(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    recipe = tmp_path / "plain.yaml"
    text = GATE_RECIPE.format(command=json.dumps("true"), results_file="x", accept_empty=False)
    recipe.write_text(text.replace("  results_file: x\n", ""))
    done = srtd("run", str(recipe), "--log-dir", str(log_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (log_dir / "results.json").exists()


def test_points_are_journaled_while_the_benchmark_still_runs(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    out = log_dir / "points.json"
    one = json.dumps({"points": [{"concurrency": 1, "requests": 4, "succeeded": 4, "output_tokens": 40}]})
    two = json.dumps(
        {
            "points": [
                {"concurrency": 1, "requests": 4, "succeeded": 4, "output_tokens": 40},
                {"concurrency": 2, "requests": 8, "succeeded": 8, "output_tokens": 80},
            ]
        }
    )
    write = "echo '{}' > {out}.tmp && mv {out}.tmp {out}"
    command = f"{write.format(one, out=out)} && sleep 3 && {write.format(two, out=out)} && sleep 3"
    recipe = tmp_path / "live.yaml"
    recipe.write_text(GATE_RECIPE.format(command=json.dumps(command), results_file="points.json", accept_empty=False))
    done = srtd("run", str(recipe), "--log-dir", str(log_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    events = [Event.from_line(line) for line in (log_dir / "events.jsonl").read_text().splitlines()]
    mine = [e for e in events if e.unit == "benchmark"]
    states = [(e.state, (e.detail or {}).get("point")) for e in mine if e.state != "waiting"]
    exited = states.index(("exited", None))
    # both points were journaled while the unit was still running, each once, in order
    assert [s for s in states[:exited] if s[1] is not None] == [("ready", 0), ("ready", 1)]
    assert all(s[1] is None for s in states[exited:])
    gap = next(e.ts for e in mine if (e.detail or {}).get("point") == 1) - next(
        e.ts for e in mine if (e.detail or {}).get("point") == 0
    )
    assert gap > 1.0  # read when it was written (3 s after the first), not at the end
    assert len(json.loads((log_dir / "results.json").read_text())["points"]) == 2
