"""`srtd run` on this machine, the way a user runs it: the demo, a killed worker, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from srtd.events import Event
from tests.command import SRTD, ctrl_c, reap, run_srtd, start_srtd
from tests.supervisor.helpers import assert_cancelled_by_sigint, assert_no_leftovers, check_journal, wait_for

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recipes" / "local" / "demo.yaml"
RESTART = REPO / "recipes" / "local" / "restart.yaml"

pytestmark = pytest.mark.slow


def srtd(*args: str, extra_env: dict[str, str] | None = None, **kwargs: object) -> subprocess.Popen[str]:
    return start_srtd(*args, env=extra_env, **kwargs)


def test_the_demo_runs_end_to_end_and_exits_0(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = srtd("run", str(DEMO), "--log-dir", str(log_dir))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    journal = check_journal(log_dir / "events.jsonl", [])
    assert journal[-1].state == "succeeded"
    assert journal[-1].exit_code == 0
    units = {e.unit for e in journal if e.unit}
    assert units == {
        "prefill_0_node1",
        "decode_0_node1",
        "decode_1_node1",
        "frontend_0",
        "service_watcher",
        "benchmark",
    }
    # the graph: the frontend is ready before the sidecar starts, the sidecar before the benchmark
    order = [(e.unit, e.state) for e in journal]
    assert order.index(("frontend_0", "ready")) < order.index(("service_watcher", "starting"))
    assert order.index(("service_watcher", "ready")) < order.index(("benchmark", "starting"))
    result = json.loads((log_dir / "benchmark.json").read_text())
    assert (result["requests"], result["errors"]) == (40, 0)
    assert json.loads((log_dir / "plan.json").read_text())["name"] == "toy-demo"
    assert "toy-demo: succeeded, exit code 0" in out
    _logs_land_in_the_layout(log_dir, "split")
    assert_no_leftovers(str(log_dir))


def test_the_flat_log_layout_keeps_every_log_at_the_top(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = srtd("run", str(DEMO), "--log-dir", str(log_dir), extra_env={"SRTD_LOG_LAYOUT": "flat"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    _logs_land_in_the_layout(log_dir, "flat")
    assert_no_leftovers(str(log_dir))


def _logs_land_in_the_layout(log_dir: Path, layout: str) -> None:
    """split: workers' and the frontend's logs in workers/, services' in services/logs/, the benchmark's
    at the top; flat: all at the top.  `srtd logs` lists them there and prints a unit's log from there."""
    split = {
        "prefill_0_node1": "workers/node1_prefill_w0.out",
        "decode_0_node1": "workers/node1_decode_w0.out",
        "decode_1_node1": "workers/node1_decode_w1.out",
        "frontend_0": "workers/node1_frontend_0.out",
        "service_watcher": "services/logs/service_watcher.out",
        "benchmark": "benchmark.out",
    }
    where = split if layout == "split" else {unit: path.rsplit("/", 1)[-1] for unit, path in split.items()}
    assert all((log_dir / path).stat().st_size > 0 for path in where.values())
    top = sorted(p.name for p in log_dir.glob("*.out"))
    assert top == (["benchmark.out"] if layout == "split" else sorted(where.values()))
    listing = run_srtd("logs", str(log_dir), "--json")
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout)["units"] == {unit: str(log_dir / path) for unit, path in where.items()}
    shown = subprocess.run([*SRTD, "logs", str(log_dir), "decode_1_node1"], check=False, cwd=REPO, capture_output=True)
    assert (shown.returncode, shown.stdout) == (0, (log_dir / where["decode_1_node1"]).read_bytes())


def test_a_killed_worker_is_restarted_and_ctrl_c_tears_down(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = srtd("run", str(RESTART), "--log-dir", str(log_dir))
    try:
        seen = wait_for(log_dir, lambda es: any(e.unit is None and e.state == "running" for e in es))
        pid = next(e.pid for e in seen if e.unit == "agg_1_node1" and e.state == "starting")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        seen = wait_for(
            log_dir,
            lambda es: any(e.unit == "agg_1_node1" and e.state == "ready" and e.attempt == 1 for e in es),
        )
        mine = [(e.state, e.attempt) for e in seen if e.unit == "agg_1_node1"]
        assert mine[-4:] == [("exited", 0), ("backoff", 1), ("starting", 1), ("ready", 1)]
        exited = next(e for e in seen if e.unit == "agg_1_node1" and e.state == "exited")
        assert exited.signal == signal.SIGKILL
        # the crashed attempt's log is kept next to the fresh one
        assert (log_dir / "workers" / "node1_agg_w1.out.1").exists()
        assert "toy-worker: ready on" in (log_dir / "workers" / "node1_agg_w1.out").read_text()
        out = ctrl_c(proc)
    finally:
        reap(proc)
    assert_cancelled_by_sigint(proc.returncode, out, log_dir)


def test_json_output_is_the_journal_then_a_summary(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = run_srtd("run", str(DEMO), "--log-dir", str(log_dir), "--json", env=env, drop=())
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    streamed = [Event.from_line(line) for line in lines[:-1]]
    assert streamed == check_journal(log_dir / "events.jsonl", [])
    summary = json.loads(lines[-1])
    assert summary["summary"] == "toy-demo: succeeded, exit code 0"
    assert [u["unit"] for u in summary["units"]][-1] == "benchmark"
    assert_no_leftovers(str(log_dir))


def test_two_demos_at_once_take_their_own_ports_and_both_exit_0(tmp_path: Path) -> None:
    """The second job finds the first one's claim and runs on the next block of ports."""
    env = {"SRTD_RUNTIME_DIR": str(tmp_path / "run")}
    first_logs, second_logs = tmp_path / "first", tmp_path / "second"
    first = srtd("run", str(DEMO), "--log-dir", str(first_logs), extra_env=env)
    wait_for(first_logs, lambda seen: any(e.unit == "frontend_0" for e in seen))  # running, ports held
    second = srtd("run", str(DEMO), "--log-dir", str(second_logs), extra_env=env)
    out_second, _ = second.communicate(timeout=120)
    out_first, _ = first.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 0), out_first + out_second
    plans = [json.loads((d / "plan.json").read_text()) for d in (first_logs, second_logs)]
    assert "port_offset" not in plans[0]
    assert plans[1]["port_offset"] == 10
    ports = [{u["name"]: u["ports"] for u in p["units"] if u["ports"]} for p in plans]
    assert ports[0] == {
        "prefill_0_node1": {"http": 6100},
        "decode_0_node1": {"http": 6132},
        "decode_1_node1": {"http": 6164},
        "frontend_0": {"http": 8000},
    }
    assert ports[1] == {u: {k: v + 10 for k, v in p.items()} for u, p in ports[0].items()}
    watcher = next(u for u in plans[1]["units"] if u["name"] == "service_watcher")
    assert "http://127.0.0.1:8010/workers" in watcher["argv"][-1]
    lowest = min(p for u in plans[0]["units"] for p in u["ports"].values())
    moved = f"srtd: ports offset by 10: port {lowest} is held by srtd job {plans[0]['job_id']} (pid {first.pid})"
    assert moved in out_second.splitlines()
    for logs in (first_logs, second_logs):
        journal = check_journal(logs / "events.jsonl", [])
        assert (journal[-1].state, journal[-1].exit_code) == ("succeeded", 0)
        assert not [e for e in journal if e.state == "failed"]
        assert_no_leftovers(str(logs))
    assert list((tmp_path / "run" / "ports").glob("*.json")) == []  # both claims released


def test_a_pinned_port_offset_is_used_as_given(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    env = {"SRTD_RUNTIME_DIR": str(tmp_path / "run")}
    proc = srtd("run", str(DEMO), "--log-dir", str(log_dir), "--port-offset", "500", extra_env=env)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    plan = json.loads((log_dir / "plan.json").read_text())
    assert plan["port_offset"] == 500
    assert next(u for u in plan["units"] if u["name"] == "frontend_0")["ports"] == {"http": 8500}
