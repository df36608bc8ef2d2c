"""`srtd sweep RECIPE...`: a benchmark campaign, submitted, followed, retried, compared (docs/sweep.md).

The jobs are `srtd submit`'s (the same prepared batch script, the frozen recipe, the
collector's POST with the campaign as the `sweep`), at most `--max-running` of them in
the queue at once; the campaign's state is its directory's `campaign.json` (srtd.sweep).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from srtd.cli._main import cli
from srtd.errors import EXIT_OK, EXIT_SWEEP_UNMEASURED, UsageError, printable

if TYPE_CHECKING:
    from srtd.cli._submit import Submission
    from srtd.sweep import Campaign, Point

CAMPAIGNS = "campaigns"  # the default campaign directory's parent, under the working directory


def _points(recipes: tuple[Path, ...], cluster_config: Path | None) -> tuple[Path | None, list[Point]]:
    from srtd.cli._submit import _prepare_all
    from srtd.sweep import Point

    cluster_file, prepared = _prepare_all(recipes, None, cluster_config)
    points: dict[str, Point] = {}
    for sub, text in prepared:
        key = sub.plan.name + (f"[{sub.loaded.variant}]" if sub.loaded.variant else "")
        if key in points:
            raise UsageError(f"{sub.loaded.file}: point {printable(key)} is also made by {points[key].recipe_file}")
        digest = hashlib.sha256(sub.loaded.recipe.model_dump_json().encode()).hexdigest()[:16]
        points[key] = Point(key, sub.plan.name, sub.loaded.variant, sub.loaded.file, digest, (sub, text))
    return cluster_file, list(points.values())


def _submitter(cluster_file: Path | None, campaign: str) -> Any:
    from srtd.cli._submit import _report, _submit

    def submit(point: Point, exclude: Sequence[str]) -> tuple[str, str]:
        sub: Submission = point.payload[0]
        # --no-requeue: a job Slurm requeued would come back under the same id; the sweep retries itself.
        args = ["--no-requeue", *([f"--exclude={','.join(exclude)}"] if exclude else [])]
        _submit(sub, point.payload[1], cluster_file, args)
        _report(sub, {"sweep": campaign})
        assert sub.job_id is not None
        return sub.job_id, sub.real_log_dir

    return submit


def _finish(campaign: Campaign, snap: dict[str, Any], as_json: bool, *, live: bool) -> int:
    unmeasured = [p for p in snap["points"] if p["status"] != "measured"]
    if as_json:
        return EXIT_SWEEP_UNMEASURED if unmeasured else EXIT_OK
    from srtd.cli._attach import console
    from srtd.cli._results import load_results
    from srtd.results import render, rows_of
    from srtd.sweep import frame

    if not live:  # the live view has left its last frame on the terminal
        console().print(frame(snap))
    measured = []
    for p in snap["points"]:
        if p["status"] == "measured" and p["log_dir"]:
            try:
                measured.append(load_results(Path(p["log_dir"])))
            except UsageError as e:
                click.echo(f"{p['key']}: {e}")
    if measured:
        rows = rows_of(measured)
        click.echo(render(rows, title=f"{len(rows)} points from {len(measured)} measured jobs"), nl=False)
    for p in unmeasured:
        job = f" (job {p['job_id']}, {p['log_dir']})" if p["job_id"] else ""
        click.echo(printable(f"not measured: {p['key']}: {p['status']}: {p['why'] or '-'}{job}"))
    click.echo(
        f"campaign {campaign.directory}: {len(snap['points']) - len(unmeasured)} of {len(snap['points'])} measured"
    )
    return EXIT_SWEEP_UNMEASURED if unmeasured else EXIT_OK


@cli.command()
@click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--campaign",
    "directory",
    type=click.Path(path_type=Path),
    help="The campaign's directory (default: campaigns/<first recipe's name>).",
)
@click.option("--cluster-config", type=click.Path(path_type=Path), help="srtslurm.yaml to read.")
@click.option(
    "--max-running",
    type=click.IntRange(1),
    help="At most this many of the campaign's jobs in the queue at once (default: the cluster's sweep_max_running).",
)
@click.option(
    "--retries",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Resubmissions of a point per infrastructure failure run.",
)
@click.option("--rerun", is_flag=True, help="Submit every point again (not those still in the queue), measured or not.")
@click.option("--cancel", is_flag=True, help="scancel the campaign's jobs in the queue, and exit.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON snapshot of the campaign per change; the last is final."
)
@click.option("--poll", type=click.FloatRange(0.1), default=2.0, show_default=True, help="Seconds between passes.")
def sweep(
    recipes: tuple[Path, ...],
    directory: Path | None,
    cluster_config: Path | None,
    max_running: int | None,
    retries: int,
    rerun: bool,
    cancel: bool,
    as_json: bool,
    poll: float,
) -> int:
    """Run every variant and sweep point of RECIPE(s) as a campaign, until each has measured or failed.

    Submits at most --max-running jobs at once, follows them, resubmits a point whose job
    failed for infrastructure (excluding the nodes to blame), reports configuration
    failures and time limits, and keeps the campaign's state in its directory: the same
    command again submits only what has no valid result yet.  Exit 0 when every point
    measured, 1 when some did not.  Ctrl-C leaves the jobs running.
    """
    import sys

    from srtd.cli._attach import console
    from srtd.cluster import load_cluster
    from srtd.sweep import Campaign, SlurmQueue, SweepView, campaign_dir, cancel_all, follow, load_manifest

    if cancel and rerun:
        raise UsageError("--cancel ends the campaign's jobs; --rerun submits them: choose one")
    cluster_file, points = _points(recipes, cluster_config)
    if max_running is None:
        max_running = load_cluster(cluster_config)[0].sweep_max_running
    directory = directory if directory is not None else Path(CAMPAIGNS) / recipes[0].stem
    directory = campaign_dir(directory)
    name = directory.resolve().name
    campaign = Campaign(directory, load_manifest(directory, name), points)
    queue = SlurmQueue(_submitter(cluster_file, campaign.manifest.campaign))
    if cancel:
        for job_id in cancel_all(campaign, queue):
            click.echo(json.dumps({"cancelled": job_id}) if as_json else f"cancelled job {job_id}")
        return EXIT_OK
    live = sys.stdout.isatty()
    view = SweepView(console(), retries, as_json=as_json, live=live, echo=click.echo)
    try:
        follow(campaign, queue, max_running=max_running, retries=retries, rerun=rerun, show=view, interval=poll)
    except KeyboardInterrupt:
        view.close()
        left = len(campaign.queued())
        click.echo(f"srtd sweep: {left} jobs left in the queue (`srtd sweep --cancel` ends them)", err=True)
        raise
    finally:
        view.close()
    snap = view.close(campaign)
    assert snap is not None
    return _finish(campaign, snap, as_json, live=live and not as_json)
