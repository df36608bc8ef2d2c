"""The log upload (`reporting.s3`): one `postprocess` unit after everything else, srtctl's upload step.

The script is run here too, with a stand-in `aws` on PATH that records its arguments, so
the quoting is checked by bash itself, not by reading the text.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from srtd.cluster import Cluster
from srtd.context import PlanContext
from srtd.plan._postprocess import (
    DEFAULT_ARCHIVE,
    DEFAULT_EXCLUDE,
    DEFAULT_PREFIX,
    postprocess_units,
    upload_config,
)
from srtd.topology import NodeNeeds, carve
from srtd.unit import Plan, Unit
from tests.plan._util import PD, load_problems, loaded, plan, plan_error

NODES = ["n1", "n2", "n3", "n4"]
HOSTILE = "a b'; rm -rf /tmp/x"
TODAY = datetime.now(UTC).date().isoformat()


def s3(**fields: Any) -> str:
    return f"reporting:\n  s3: {json.dumps(fields)}\n" + PD


def upload_of(p: Plan) -> Unit:
    return p.unit("postprocess")


def run_script(unit: Unit, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Run the unit's bash with a stand-in `aws` that records each call's arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "aws"
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "open(os.environ['AWS_CALLS'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls.jsonl"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "AWS_CALLS": str(calls)}
    assert unit.argv[:2] == ("bash", "-c")
    done = subprocess.run(list(unit.argv), env=env, capture_output=True, text=True, timeout=60, check=False)
    lines = calls.read_text().splitlines() if calls.exists() else []
    return done, [json.loads(line) for line in lines]


def test_no_s3_anywhere_no_upload() -> None:
    p = plan(PD, nodes=NODES)
    assert "postprocess" not in [u.name for u in p.units]
    assert "postprocess" not in p.phases


def test_the_upload_runs_on_the_head_after_everything_else_and_is_not_critical() -> None:
    body = 'host_setup:\n  teardown: ["reset clocks"]\n' + s3(bucket="logs")
    p = plan(body, nodes=NODES)
    unit = upload_of(p)
    assert p.units[-1].name == "postprocess"
    assert p.phases[-2:] == ("host_teardown", "postprocess")
    assert (unit.phase, unit.nodes, unit.log) == ("postprocess", ("n1",), "postprocess.log")
    assert unit.on_teardown
    assert not unit.critical
    assert not unit.after
    assert unit.run_timeout == 600.0
    others = [u.tier for u in p.units if u.name != "postprocess"]
    teardown = [u.tier for u in p.units if u.name.startswith("host_teardown_")]
    assert unit.tier == max(others) + 1 == max(teardown) + 1
    # its run counts in the teardown budget like a host teardown step's
    assert p.teardown.tiers[str(unit.tier)] == 605.0


def test_the_log_keeps_srtctls_name_in_either_layout() -> None:
    for layout in ("split", "flat"):
        assert upload_of(plan(s3(bucket="b"), Cluster(log_layout=layout), nodes=NODES)).log == "postprocess.log"


def test_under_containers_it_runs_in_python_with_only_the_logs_mounted() -> None:
    p = plan(s3(bucket="b"), nodes=NODES, log_dir="/shared/job/logs")
    unit = upload_of(p)
    assert unit.container is not None
    assert unit.container.image == "python:3.11"
    assert unit.container.mounts == {"/shared/job/logs": "/logs"}
    script = unit.argv[2]
    assert "logs=/logs\n" in script
    assert "pip install awscli" in script


def test_bare_it_uses_the_host_log_dir_and_no_container() -> None:
    for p in (
        plan(s3(bucket="b"), nodes=NODES, log_dir="/shared/logs", local=True),
        plan(s3(bucket="b"), Cluster(container_runtime="none"), nodes=NODES, log_dir="/shared/logs"),
    ):
        unit = upload_of(p)
        assert unit.container is None
        assert "logs=/shared/logs\n" in unit.argv[2]
        # awscli is installed only when no `aws` is on PATH
        assert "if ! command -v aws" in unit.argv[2]


def test_the_url_is_bucket_prefix_day_job(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    body = s3(bucket="b", prefix="/team/runs/", exclude=[], archive=[])
    _, calls = run_script(upload_of(plan(body, nodes=NODES, job_id="777", log_dir=str(log_dir), local=True)), tmp_path)
    assert calls[0][-1] == f"s3://b/team/runs/{TODAY}/777/"
    default = upload_of(plan(s3(bucket="b"), nodes=NODES, job_id="9", log_dir=str(tmp_path)))
    assert f'url=s3://b/{DEFAULT_PREFIX}/"$day"/9/\n' in default.argv[2]


def test_the_day_is_the_jobs_start_and_the_plan_holds_none(tmp_path: Path) -> None:
    """The day is plan.json's (written when `srtd run` starts), so a job that ends after midnight
    uploads under the day it started; the plan itself is the same whatever day it is built."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "plan.json").write_text("{}")
    os.utime(log_dir / "plan.json", (1738281600, 1738281600))  # 2025-01-31 00:00 UTC
    unit = upload_of(plan(s3(bucket="b", exclude=[], archive=[]), nodes=NODES, log_dir=str(log_dir), local=True))
    done, calls = run_script(unit, tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls[0][-1] == "s3://b/srtslurm/2025-01-31/local/"
    status = json.loads((log_dir / "postprocess-status.json").read_text())
    assert status["s3_url"] == "s3://b/srtslurm/2025-01-31/local/"
    assert not any(TODAY in a for a in unit.argv)


def _ctx(body: str, cluster: Cluster | None = None) -> PlanContext:
    recipe = loaded(body).recipe
    return PlanContext(
        recipe=recipe,
        cluster=cluster or Cluster(),
        job_id="local",
        local=True,
        log_dir="/l",
        nodes=carve(NodeNeeds(roles={"prefill": 1, "decode": 1}), ["n1", "n2"]),
        gpus_per_node=8,
    )


def test_a_hostile_prefix_stays_one_argument(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    body = s3(
        bucket="b",
        prefix=HOSTILE,
        endpoint_url="http://127.0.0.1:9/x y",
        region="eu-west-1; id",
        exclude=[],
        archive=[],
    )
    unit = upload_of(plan(body, nodes=NODES, log_dir=str(log_dir), local=True))
    done, calls = run_script(unit, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    url = f"s3://b/{HOSTILE}/{TODAY}/local/"
    flags = ["--endpoint-url", "http://127.0.0.1:9/x y", "--region", "eu-west-1; id"]
    # endpoint and region go with every aws call: the sync and the count
    assert calls == [
        [*flags, "s3", "sync", "--no-progress", str(log_dir), url],
        [*flags, "s3", "ls", "--recursive", url],
    ]
    status = json.loads((log_dir / "postprocess-status.json").read_text())
    assert status == {"s3_url": url, "exclude": [], "archive": []}
    assert f"Upload complete: {url}" in done.stdout
    assert not (tmp_path / "x").exists()


def test_excludes_and_the_archive(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    (log_dir / "artifacts" / "run1").mkdir(parents=True)
    (log_dir / "artifacts" / "run1" / "profile_export.jsonl").write_text('{"r": 1}\n' * 100)
    body = s3(bucket="b", exclude=["*.pid", "odd name/*"])
    unit = upload_of(plan(body, nodes=NODES, log_dir=str(log_dir), local=True))
    done, calls = run_script(unit, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    url = f"s3://b/srtslurm/{TODAY}/local/"
    sync, copy, _count = calls
    # each exclude its own `--exclude`, the archive's files left out of the sync (`**` as aws's `*`)
    assert sync[sync.index("sync") + 4 :] == [
        "--exclude",
        "*.pid",
        "--exclude",
        "odd name/*",
        *[x for p in DEFAULT_ARCHIVE for x in ("--exclude", p.replace("**", "*"))],
    ]
    assert copy[:3] == ["s3", "cp", "--no-progress"]
    assert copy[4] == url + Path(copy[3]).name
    assert Path(copy[3]).name in ("bundle.tar.zst", "bundle.tar.xz")
    assert Path(copy[3]).stat().st_size > 0
    assert not (log_dir / "bundle.tar.zst").exists()  # the bundle is packed outside the log directory


def test_unset_policy_is_srt_slurms_default_and_empty_lists_mean_none() -> None:
    ctx = _ctx(s3(bucket="b"))
    upload = upload_config(ctx.recipe, ctx.cluster)
    assert upload is not None
    assert (upload.exclude, upload.archive) == (DEFAULT_EXCLUDE, DEFAULT_ARCHIVE)
    ctx = _ctx(s3(bucket="b", exclude=[], archive=[]))
    upload = upload_config(ctx.recipe, ctx.cluster)
    assert upload is not None
    assert (upload.exclude, upload.archive) == ((), ())
    assert "--exclude" not in postprocess_units(ctx, 0)[0].argv[2]


def test_the_recipe_wins_over_the_cluster_field_by_field() -> None:
    cluster = Cluster(
        reporting={  # type: ignore[arg-type]
            "s3": {"bucket": "cb", "prefix": "cp", "region": "r1", "endpoint_url": "http://e1", "exclude": ["x"]}
        }
    )
    ctx = _ctx(s3(bucket="rb", region="r2", archive=[]), cluster)
    upload = upload_config(ctx.recipe, ctx.cluster)
    assert upload is not None
    assert (upload.bucket, upload.prefix, upload.region, upload.endpoint_url) == ("rb", "cp", "r2", "http://e1")
    assert (upload.exclude, upload.archive) == (("x",), ())
    # a recipe may name only its prefix and take the cluster's bucket and policy
    only_prefix = upload_config(_ctx(s3(prefix="mine"), cluster).recipe, cluster)
    assert only_prefix is not None
    assert (only_prefix.bucket, only_prefix.prefix, only_prefix.exclude) == ("cb", "mine", ("x",))
    # the cluster's upload alone is every job's
    alone = plan(PD, cluster, nodes=NODES, job_id="5")
    assert 'url=s3://cb/cp/"$day"/5/\n' in upload_of(alone).argv[2]


def test_no_bucket_anywhere_is_refused() -> None:
    assert "reporting.s3 names no bucket" in plan_error(s3(prefix="p"), nodes=NODES)


def test_credentials_stay_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "wJalrXUtnFEMI-not-a-real-secret-K7MDENG"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-test-key-id-1234")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-5678")
    for local in (False, True):
        p = plan(s3(bucket="b", region="us-east-1"), nodes=NODES, local=local)
        text = json.dumps(p.to_json())
        assert "postprocess" in text
        for value in (secret, "AKIA-test-key-id-1234", "session-token-5678"):
            assert value not in text
        assert "AWS_" not in json.dumps(upload_of(p).env)


def test_a_literal_secret_in_the_recipe_is_refused() -> None:
    problems = load_problems("reporting:\n  s3: {bucket: b, secret_access_key: abc}\n")
    assert [(path, "AWS_SECRET_ACCESS_KEY" in message) for _, path, message in problems] == [
        ("reporting.s3.secret_access_key", True)
    ]
