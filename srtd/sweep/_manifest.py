"""The campaign directory and its manifest, `campaign.json` (docs/sweep.md).

One JSON document, replaced in one step on every change (`write_under`): a reader, or a
second `srtd sweep` after a crash, sees the old manifest or the new one, never half.
Per point: its recipe hash and every job submitted for it, each with Slurm's last state,
srtd's end, the classification and the nodes it blamed.  The manifest is read back as
untrusted (a hand edit, a truncated file, a FIFO at its name): a regular file of at most
16 MiB, valid against these models, else one line and exit 2.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from srtd._files import OUTPUT_LIMIT, read_text_back, write_under
from srtd.errors import FileRefused, UsageError, printable

MANIFEST_NAME = "campaign.json"
FORMAT = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobRecord(_Model):
    """One Slurm job of a point."""

    job_id: str = Field(min_length=1, max_length=64, pattern=r"^[0-9_A-Za-z.]+$")
    recipe_hash: str = Field(max_length=64)
    log_dir: str = Field(max_length=4096)
    exclude: list[str] = Field(default_factory=list, max_length=4096)
    slurm_state: str | None = Field(default=None, max_length=64)
    end_state: str | None = Field(default=None, max_length=64)
    exit_code: int | None = None
    outcome: str | None = Field(default=None, max_length=64)  # None: still in the queue
    why: str | None = Field(default=None, max_length=4096)
    blame: list[str] = Field(default_factory=list, max_length=4096)


class PointRecord(_Model):
    name: str = Field(max_length=4096)
    variant: str | None = Field(default=None, max_length=65536)
    recipe_file: str = Field(max_length=4096)
    recipe_hash: str = Field(max_length=64)
    jobs: list[JobRecord] = Field(default_factory=list, max_length=10_000)


class Manifest(_Model):
    format: int = FORMAT
    campaign: str = Field(max_length=4096)
    points: dict[str, PointRecord] = Field(default_factory=dict)


def campaign_dir(path: Path) -> Path:
    """`path` made (if missing) and checked to be a directory, never through a link at its own name."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            path.mkdir(parents=True)
        except OSError as e:
            raise FileRefused(f"{path}: cannot make the campaign directory: {e.strerror}") from None
        return path
    if not stat.S_ISDIR(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise UsageError(f"{path}: is {kind}; a campaign is a directory")
    return path


def load_manifest(directory: Path, campaign: str) -> Manifest:
    """The campaign's manifest, or a new one when the directory has none."""
    path = directory / MANIFEST_NAME
    if not os.path.lexists(path):
        return Manifest(campaign=campaign)
    try:
        text = read_text_back(path, limit=OUTPUT_LIMIT, error=UsageError, follow=False)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as e:
        first = printable(str(e).splitlines()[0])
        raise UsageError(f"{path}: not a campaign manifest written by srtd ({first})") from None


def save_manifest(directory: Path, manifest: Manifest) -> None:
    data = json.dumps(manifest.model_dump(mode="json"), indent=1) + "\n"
    write_under(directory, directory / MANIFEST_NAME, data, error=FileRefused)


def measured_log_dirs(directory: Path) -> list[Path]:
    """`srtd results CAMPAIGN`: the log directory of each point's measured job (its last), in point order."""
    manifest = load_manifest(directory, directory.name)
    found = []
    for point in manifest.points.values():
        measured = [j for j in point.jobs if j.outcome == "measured" and j.recipe_hash == point.recipe_hash]
        if measured:
            found.append(Path(measured[-1].log_dir))
    return found
