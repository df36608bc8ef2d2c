"""A campaign directory that is hostile or corrupt (docs/sweep.md): `srtd sweep` reads its
manifest back as untrusted.  Each case: one line, exit 2 or 3, no traceback, no hang, and
nothing submitted (these run without Slurm: the refusal comes before any sbatch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hostile.helpers import bounded, one_line

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "slurm-dev" / "toy-sweep.yaml"


def sweep(tmp_path: Path, campaign: Path) -> tuple[int, str]:
    done = bounded("sweep", str(RECIPE), "--campaign", str(campaign), cwd=tmp_path, env={"PATH": "/nonexistent"})
    return done.code, one_line(done.stderr)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "not a campaign manifest written by srtd (1 validation error for Manifest)"),
        (b'{"campaign": "c", "points": {"p": {"name": 1}}}', "not a campaign manifest written by srtd"),
        (b'{"campaign": "c", "points": {}, "evil": 1}', "not a campaign manifest written by srtd"),
        (b"\xff\xfe", "not UTF-8 text"),
        (
            b'{"campaign": "c", "points": {"p": {"name": "n", "recipe_file": "f", "recipe_hash": "h", '
            b'"jobs": [{"job_id": "1;rm -rf /", "recipe_hash": "h", "log_dir": "/"}]}}}',
            "not a campaign manifest written by srtd",
        ),
    ],
)
def test_a_corrupt_manifest_is_one_line_and_exit_2(tmp_path: Path, content: bytes, says: str) -> None:
    campaign = tmp_path / "c"
    campaign.mkdir()
    (campaign / "campaign.json").write_bytes(content)
    code, line = sweep(tmp_path, campaign)
    assert code == 2
    assert line.startswith(f"srtd: {campaign}/campaign.json:"), line
    assert says in line, line
    assert (campaign / "campaign.json").read_bytes() == content  # left as it was


def test_a_fifo_manifest_is_refused_without_blocking(tmp_path: Path) -> None:
    campaign = tmp_path / "c"
    campaign.mkdir()
    os.mkfifo(campaign / "campaign.json")
    code, line = sweep(tmp_path, campaign)
    assert code == 2
    assert line.startswith(f"srtd: {campaign}/campaign.json:"), line
    assert "fifo" in line.lower(), line


def test_a_manifest_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    campaign = tmp_path / "c"
    campaign.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"campaign": "c", "points": {}}')
    (campaign / "campaign.json").symlink_to(secret)
    code, line = sweep(tmp_path, campaign)
    assert code == 2
    assert str(campaign / "campaign.json") in line, line


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_campaign_path_that_is_not_a_directory_is_refused(tmp_path: Path, kind: str) -> None:
    campaign = tmp_path / "c"
    if kind == "file":
        campaign.write_text("x")
    else:
        (tmp_path / "elsewhere").mkdir()
        campaign.symlink_to(tmp_path / "elsewhere")
    code, line = sweep(tmp_path, campaign)
    assert code == 2
    what = "not a directory" if kind == "file" else "a symbolic link"
    assert line == f"srtd: {campaign}: is {what}; a campaign is a directory"
    assert not (tmp_path / "elsewhere" / "campaign.json").exists()


def test_without_slurm_tools_the_first_submission_is_one_line_and_exit_3(tmp_path: Path) -> None:
    campaign = tmp_path / "c"
    code, line = sweep(tmp_path, campaign)
    assert code == 3
    assert line.startswith("srtd: sbatch"), line
    assert "needs Slurm's client tools" in line
    manifest = (campaign / "campaign.json").read_text()
    assert '"jobs": []' in manifest or '"points": {}' in manifest  # nothing recorded as submitted


def test_cancel_and_rerun_together_are_refused(tmp_path: Path) -> None:
    done = bounded("sweep", str(RECIPE), "--cancel", "--rerun", cwd=tmp_path)
    assert done.code == 2
    assert one_line(done.stderr) == "srtd: --cancel ends the campaign's jobs; --rerun submits them: choose one"
