"""`srtd run` on this machine against a real collector on loopback (tests/programs/collector.py).

The collector validates every body against the contract; these tests check what it
received: the POST, the stages in order, the final status with the exit code, the
bearer token on every request, and that the token is nowhere in the log directory.
A collector that accepts connections and never answers must not slow the job down.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.command import SRTD
from tests.reporting import EVERY_STAGE
from tests.supervisor.helpers import assert_no_leftovers

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "recipes" / "features" / "status-reporting.yaml"
COLLECTOR = REPO / "tests" / "programs" / "collector.py"
# Local runs use fixed ports (the toy router's 8000, the worker's 6100): a neighbour's job
# on this machine may hold them, and then the run is tried again.
PORT_TAKEN = "Address already in use"
FIXED_PORTS = (8000, 6100)

pytestmark = pytest.mark.slow


@dataclass
class Collector:
    url: str
    record: Path

    def requests(self, job_id: str) -> list[dict[str, Any]]:
        """What the collector received about one job (an earlier attempt's job is another)."""
        if not self.record.exists():
            return []
        seen = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [r for r in seen if r["path"].endswith("/" + job_id) or (r["body"] or {}).get("job_id") == job_id]


@pytest.fixture
def token() -> str:
    return f"srtd-test-token-{uuid.uuid4().hex}"


@pytest.fixture
def collector(tmp_path: Path, token: str) -> Iterator[Collector]:
    yield from serve(tmp_path, "--token", token)


@pytest.fixture
def login_page(tmp_path: Path) -> Iterator[Collector]:
    """A collector behind a single sign-on page: every job request is redirected."""
    yield from serve(tmp_path, "--answer", "302")


def serve(tmp_path: Path, *options: str) -> Iterator[Collector]:
    port_file = tmp_path / "collector.port"
    record = tmp_path / "collector.jsonl"
    argv = [sys.executable, str(COLLECTOR), "--record", str(record), "--port-file", str(port_file)]
    proc = subprocess.Popen([*argv, *options, "--tag", str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert proc.poll() is None, "the collector did not start"
            assert time.monotonic() < deadline, "the collector did not start in time"
            time.sleep(0.05)
        yield Collector(f"http://127.0.0.1:{port_file.read_text()}", record)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def recipe(tmp_path: Path, endpoint: str | None, *, failing: bool = False) -> Path:
    text = EXAMPLE.read_text()
    if endpoint is None:
        text = text[: text.index("\nreporting:") + 1]
    else:
        text = text.replace("http://127.0.0.1:8080", endpoint)
    service = "import time; print('cache ready'); time.sleep(3600)"
    if failing:  # the infrastructure service dies before it is ready
        text = text.replace(service, "import sys; sys.exit(3)")
    else:  # and says whether it inherited the token (into its log, which is searched for it)
        text = text.replace(
            service,
            "import os, time; print('cache ready;', os.environ.get('SRTCTL_STATUS_TOKEN', 'no token')); "
            "time.sleep(3600)",
        )
    path = tmp_path / f"recipe-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(text)
    return path


@dataclass
class Run:
    code: int
    output: str
    log_dir: Path
    seconds: float


def run(tmp_path: Path, recipe_path: Path, env: dict[str, str]) -> Run:
    """`srtd run`, again (a few times) when a neighbour's job holds the toy router's port."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRTD_", "SRTCTL_"))}
    for attempt in range(6):
        for port in FIXED_PORTS:
            wait_until_free(port)
        log_dir = tmp_path / f"logs-{recipe_path.stem}-{attempt}-{uuid.uuid4().hex[:6]}"
        began = time.monotonic()
        done = subprocess.run(
            [*SRTD, "run", str(recipe_path), "--log-dir", str(log_dir)],
            check=False,
            cwd=tmp_path,
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=180,
        )
        seconds = time.monotonic() - began
        assert_no_leftovers(str(log_dir))
        if any(PORT_TAKEN in log.read_text(errors="replace") for log in log_dir.glob("*.out")):
            time.sleep(1)
            continue
        return Run(done.returncode, done.stdout + done.stderr, log_dir, seconds)
    pytest.skip(f"ports {FIXED_PORTS} stayed taken by other jobs on this machine")


def wait_until_free(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                time.sleep(0.2)
            else:
                return


def job_id_of(result: Run) -> str:
    return "laptop:" + json.loads((result.log_dir / "plan.json").read_text())["job_id"]


def token_in(root: Path, token: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]


def test_a_local_job_reports_the_post_every_stage_and_the_end_with_the_token(
    tmp_path: Path, collector: Collector, token: str
) -> None:
    result = run(tmp_path, recipe(tmp_path, collector.url), {"SRTCTL_STATUS_TOKEN": token})
    assert result.code == 0, result.output
    job_id = job_id_of(result)
    seen = collector.requests(job_id)
    assert [r["wrong"] for r in seen] == [[]] * len(seen), seen  # every body is the contract's
    assert {r["authorization"] for r in seen} == {f"Bearer {token}"}
    assert {r["answer"] for r in seen} <= {200, 201}
    assert (seen[0]["method"], seen[0]["path"]) == ("POST", "/api/jobs")
    assert (seen[0]["body"]["job_id"], seen[0]["body"]["job_name"]) == (job_id, "toy-status")
    puts = seen[1:]
    assert {(r["method"], r["path"]) for r in puts} == {("PUT", f"/api/jobs/{job_id}")}
    # the benchmark's point follows its stage, as benchmark_results (docs/results.md)
    assert [(r["body"]["status"], r["body"].get("stage")) for r in puts] == [
        *EVERY_STAGE[:-1],
        ("benchmark", "benchmark"),
        EVERY_STAGE[-1],
    ]
    measured = json.loads((result.log_dir / "results.json").read_text())["points"]
    points = puts[-2]["body"]["benchmark_results"]["points"]
    assert [p["output_tokens"] for p in points] == [p["output_tokens"] for p in measured]
    assert points[0]["requests_succeeded"] == measured[0]["requests_succeeded"] > 0
    started = puts[0]["body"]
    assert started["metadata"]["log_dir"] == str(result.log_dir)
    assert (started["metadata"]["backend_type"], started["metadata"]["frontend_type"]) == ("toy", "toy-router")
    assert puts[-1]["body"]["exit_code"] == 0
    cache_log = result.log_dir / "services" / "logs" / "service_cache.out"
    assert "cache ready; no token" in cache_log.read_text()  # units never get it
    assert token_in(result.log_dir, token) == []
    assert token not in result.output


def test_the_cluster_settings_report_a_failing_job_with_its_exit_code(
    tmp_path: Path, collector: Collector, token: str
) -> None:
    env = {
        "SRTD_REPORTING__STATUS__ENDPOINT": collector.url,
        "SRTD_REPORTING__STATUS__TOKEN_ENV": "LAB_STATUS_TOKEN",
        "LAB_STATUS_TOKEN": token,
    }
    result = run(tmp_path, recipe(tmp_path, None, failing=True), env)
    assert result.code == 1, result.output
    seen = collector.requests(job_id_of(result).removeprefix("laptop:"))
    assert [r["wrong"] for r in seen] == [[]] * len(seen), seen
    assert {r["authorization"] for r in seen} == {f"Bearer {token}"}
    assert [(r["method"], r["body"].get("status"), r["body"].get("stage")) for r in seen] == [
        ("POST", None, None),
        ("PUT", "starting", "starting"),
        ("PUT", "starting", "head_infrastructure"),
        ("PUT", "failed", "head_infrastructure"),
        ("PUT", "failed", "cleanup"),
    ]
    assert seen[-1]["body"]["exit_code"] == 1
    assert "service_cache failed" in seen[-2]["body"]["message"]
    assert token_in(result.log_dir, token) == []
    assert token not in result.output


def test_a_redirect_to_a_login_page_is_a_warning_and_the_job_goes_on(
    tmp_path: Path, login_page: Collector, token: str
) -> None:
    result = run(tmp_path, recipe(tmp_path, login_page.url, failing=True), {"SRTCTL_STATUS_TOKEN": token})
    assert result.code == 1, result.output  # the recipe's own failure, nothing of the collector's
    seen = login_page.requests(job_id_of(result))
    assert [r["answer"] for r in seen] == [302] * 5  # each tried once, the redirect never followed
    warnings = [line for line in result.output.splitlines() if "status collector redirected" in line]
    assert len(warnings) == 1  # once per collector and answer
    assert "status=302" in warnings[0]
    assert token not in result.output
    assert token_in(result.log_dir, token) == []


# A short job with no fixed ports: a service gated by a log probe, then a terminal one.
# Its wall time is mostly srtd's own (start, plan, teardown), which reporting could grow.
SHORT_JOB = """\
schema: 2
name: short
model: {path: "hf:srtd/toy", container: toy, precision: bf16}
resources: {gpu_type: cpu, gpus_per_node: 1}
frontend: {type: none}
observability: {tachometer: {enabled: false}}
services:
  - name: infra
    start: before_workers
    command: [python3, -c, "import time; print('up', flush=True); time.sleep(3600)"]
    readiness: {log: {pattern: up}}
  - name: job
    command: [python3, -c, "import time; time.sleep(0.5)"]
    terminal: true
"""


def test_a_collector_that_never_answers_does_not_slow_the_job(tmp_path: Path, token: str) -> None:
    # The machine is shared, so one run's wall time is noisy: compare the best of three.
    with socket.socket() as hang:  # the kernel accepts connections; nobody ever reads or answers
        hang.bind(("127.0.0.1", 0))
        hang.listen(64)
        plain_recipe = tmp_path / "plain.yaml"
        plain_recipe.write_text(SHORT_JOB)
        hanging_recipe = tmp_path / "hanging.yaml"
        url = f"http://127.0.0.1:{hang.getsockname()[1]}"
        # units: true, so the journal batches hang as well as the plain updates
        hanging_recipe.write_text(SHORT_JOB + f"reporting:\n  status:\n    endpoint: {url}\n    units: true\n")
        plain: list[Run] = []
        hanging: list[Run] = []
        for _ in range(3):
            plain.append(run(tmp_path, plain_recipe, {}))
            hanging.append(run(tmp_path, hanging_recipe, {"SRTCTL_STATUS_TOKEN": token}))
    assert [r.code for r in plain + hanging] == [0] * 6, [r.output for r in plain + hanging if r.code]
    best_plain, best_hanging = min(r.seconds for r in plain), min(r.seconds for r in hanging)
    assert best_hanging - best_plain < 1.0, ([r.seconds for r in plain], [r.seconds for r in hanging])
    assert all(token_in(r.log_dir, token) == [] for r in hanging)
