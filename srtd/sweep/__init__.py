"""`srtd sweep`: a campaign of sweep points, submitted, followed, classified, retried (docs/sweep.md).

- `_manifest`: the campaign directory and its manifest (`campaign.json`), written atomically;
- `_classify`: why an ended job ended (infrastructure, configuration, time limit, measured);
- `_facts`: what srtd's journal and results and what Slurm say about one job;
- `_slurm`: the queue seam (submit with blamed nodes excluded, state, cancel);
- `_follow`: the loop that keeps at most K jobs in the queue and resubmits infrastructure failures;
- `_view`: the live table and the `--json` lines.
"""

from __future__ import annotations

from srtd.sweep._classify import Facts, Outcome, classify
from srtd.sweep._follow import Campaign, Point, cancel_all, follow
from srtd.sweep._manifest import (
    MANIFEST_NAME,
    JobRecord,
    Manifest,
    PointRecord,
    campaign_dir,
    load_manifest,
    measured_log_dirs,
    save_manifest,
)
from srtd.sweep._slurm import SlurmQueue
from srtd.sweep._view import SweepView, frame, snapshot

__all__ = [
    "MANIFEST_NAME",
    "Campaign",
    "Facts",
    "JobRecord",
    "Manifest",
    "Outcome",
    "Point",
    "PointRecord",
    "SlurmQueue",
    "SweepView",
    "campaign_dir",
    "cancel_all",
    "classify",
    "follow",
    "frame",
    "load_manifest",
    "measured_log_dirs",
    "save_manifest",
    "snapshot",
]
