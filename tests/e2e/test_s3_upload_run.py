"""`srtd run` of a local toy job with `reporting.s3`, uploading to a real S3-compatible server.

moto's standalone server listens on loopback; the job's `postprocess` step runs the
real `aws` against it after the job (and after its host teardown step).  A second job
points at a port nobody listens on: the upload fails, the journal and the summary say
so, and the job still exits with its own code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from srtd.events import Event
from tests.supervisor.helpers import check_journal

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recipes" / "local" / "demo.yaml"
BUCKET = "srtd-test-logs"
PREFIX = "e2e/runs"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("aws") is None, reason="the upload needs the aws command (pip install awscli)"),
    pytest.mark.skipif(
        importlib.util.find_spec("moto") is None, reason="needs moto's S3 server (pip install 'moto[server]')"
    ),
]

# what both the server's client calls and the job's upload step see: fake credentials,
# no instance metadata lookups, one attempt per request (a dead endpoint fails fast)
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_MAX_ATTEMPTS": "1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def aws(endpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **AWS_ENV}
    argv = ["aws", "--endpoint-url", endpoint, "--region", "us-east-1", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def s3_server(tmp_path: Path) -> Iterator[str]:
    """moto's S3 server on a free loopback port, with the bucket made; its endpoint URL."""
    port = free_port()
    log = (tmp_path / "moto.log").open("w")
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **AWS_ENV})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "moto.log").read_text()
                assert time.monotonic() < deadline, "moto's server did not listen within 30 s"
                time.sleep(0.1)
        made = aws(endpoint, "s3", "mb", f"s3://{BUCKET}")
        assert made.returncode == 0, made.stdout + made.stderr
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def recipe(tmp_path: Path, endpoint: str) -> Path:
    """The demo with a log upload, and a host teardown step that leaves a `.pid` file the upload skips."""
    data = YAML(typ="safe").load(DEMO.read_text())
    data["host_setup"] = {"teardown": ['echo 123 > "$SRTD_LOG_DIR/leftover.pid"; echo torn down']}
    data["reporting"] = {
        "s3": {
            "bucket": BUCKET,
            "prefix": PREFIX,
            "endpoint_url": endpoint,
            "region": "us-east-1",
            "exclude": ["*.pid"],
        }
    }
    path = tmp_path / "upload.yaml"
    with path.open("w") as f:
        YAML().dump(data, f)
    return path


def run(recipe_file: Path, log_dir: Path) -> tuple[subprocess.CompletedProcess[str], list[Event]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | AWS_ENV
    argv = [sys.executable, "-m", "srtd", "run", str(recipe_file), "--log-dir", str(log_dir), "--plain"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    return done, check_journal(log_dir / "events.jsonl", [])


def final(journal: list[Event], unit: str) -> Event:
    return next(e for e in reversed(journal) if e.unit == unit and e.state in ("stopped", "failed"))


def test_the_logs_land_in_the_bucket_after_the_job(tmp_path: Path, s3_server: str) -> None:
    log_dir = tmp_path / "logs"
    done, journal = run(recipe(tmp_path, s3_server), log_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert journal[-1].state == "succeeded"
    plan = json.loads((log_dir / "plan.json").read_text())
    # <prefix>/<the day the job started, UTC>/<job id>/
    started = datetime.fromtimestamp((log_dir / "plan.json").stat().st_mtime, UTC).date().isoformat()
    url = f"s3://{BUCKET}/{PREFIX}/{started}/{plan['job_id']}/"
    # the upload ran after the host teardown step had ended, and exited 0
    order = [(e.unit, e.state) for e in journal]
    assert order.index(("host_teardown_node1", "stopped")) < order.index(("postprocess", "starting"))
    assert final(journal, "postprocess").state == "stopped"
    assert final(journal, "postprocess").exit_code == 0
    # what the bucket holds under <prefix>/<day>/<job id>/
    listed = aws(s3_server, "s3", "ls", "--recursive", url)
    assert listed.returncode == 0, listed.stderr
    key_prefix = url.removeprefix(f"s3://{BUCKET}/")
    keys = {line.split()[-1].removeprefix(key_prefix) for line in listed.stdout.splitlines()}
    assert {"plan.json", "events.jsonl", "benchmark.out", "host_teardown_node1.out", "postprocess-status.json"} <= keys
    assert "leftover.pid" not in keys
    assert (log_dir / "leftover.pid").exists()
    status = json.loads((log_dir / "postprocess-status.json").read_text())
    assert status == {"s3_url": url, "exclude": ["*.pid"], "archive": list(status["archive"])}
    uploaded = aws(s3_server, "s3", "cp", url + "postprocess-status.json", "-")
    assert json.loads(uploaded.stdout)["s3_url"] == url
    upload_log = (log_dir / "postprocess.log").read_text()
    assert f"Upload complete: {url}" in upload_log


def test_a_failed_upload_is_named_and_leaves_the_exit_code_alone(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    nobody = f"http://127.0.0.1:{free_port()}"
    done, journal = run(recipe(tmp_path, nobody), log_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert journal[-1].state == "succeeded"
    failed = final(journal, "postprocess")
    assert failed.state == "failed"
    assert failed.exit_code == 11
    assert (failed.detail or {}).get("ignored") is True
    assert "Upload failed" in (log_dir / "postprocess.log").read_text()
    output = done.stdout + done.stderr
    assert "postprocess" in output
    assert "exit code 11" in output
