"""`srtd results CAMPAIGN`: the campaign directory stands for its points' measured jobs."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import srtd.cli._commands  # noqa: F401  (registers the commands)
from srtd.cli._main import cli
from srtd.results import Point, Results, Verdict, write_results
from srtd.sweep import JobRecord, Manifest, PointRecord, save_manifest


def _job(log_dir: Path, job_id: str, variant: str, concurrency: int) -> None:
    log_dir.mkdir(parents=True)
    point = Point(concurrency=concurrency, requests_sent=4, requests_succeeded=4, output_tok_s=10.0 * concurrency)
    write_results(
        Results(
            job="toy",
            job_id=job_id,
            variant=variant,
            unit="benchmark",
            reader="srtd",
            path="b.json",
            points=(point,),
            verdict=Verdict(ok=True),
        ),
        log_dir,
    )


def test_a_campaign_lists_the_measured_job_of_each_point(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    for job_id, variant, c in (("11", "c=1", 1), ("12", "c=2", 2), ("13", "c=2", 2)):
        _job(tmp_path / job_id, job_id, variant, c)
    jobs = {
        "toy[c=1]": [JobRecord(job_id="11", recipe_hash="h1", log_dir=str(tmp_path / "11"), outcome="measured")],
        "toy[c=2]": [
            JobRecord(job_id="12", recipe_hash="h2", log_dir=str(tmp_path / "12"), outcome="measured"),
            JobRecord(job_id="13", recipe_hash="h2", log_dir=str(tmp_path / "13"), outcome="measured"),
        ],
        "toy[c=3]": [JobRecord(job_id="14", recipe_hash="h3", log_dir=str(tmp_path / "14"), outcome="configuration")],
    }
    points = {
        k: PointRecord(name="toy", variant=k[4:-1], recipe_file="t.yaml", recipe_hash=v[0].recipe_hash, jobs=v)
        for k, v in jobs.items()
    }
    save_manifest(campaign, Manifest(campaign="campaign", points=points))
    done = CliRunner().invoke(cli, ["results", str(campaign), "--json"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout)["rows"]
    assert [r["job_id"] for r in rows] == ["11", "13"]  # the last measured job of each point; none of c=3


def test_a_campaign_with_nothing_measured_is_one_line_and_exit_2(tmp_path: Path) -> None:
    save_manifest(tmp_path, Manifest(campaign="c"))
    done = CliRunner().invoke(cli, ["results", str(tmp_path)])
    assert done.exit_code == 2
    assert done.stderr == f"srtd: {tmp_path}: campaign with no measured point yet\n"
