"""The log upload after the job: `reporting.s3` as one `postprocess` unit.

The recipe's `reporting.s3` lies over the cluster's field by field (a field the recipe
writes wins; `exclude: []` or `archive: []` replaces the cluster's list).  With neither,
the job gets no upload.  Otherwise one unit, `postprocess`, runs on the head node once
the job is over: `on_teardown`, in a tier of its own after every other one (the host
teardown steps included), so it ships the logs of every unit, the teardown's too.

It copies the log directory to `s3://<bucket>/<prefix>/<YYYY-MM-DD>/<job id>/` (the
day the job started, UTC: `plan.json`'s time, which `srtd run` writes first; the plan
itself holds no date, so the same inputs still give the same plan) with `aws s3 sync`,
leaving out the `exclude` patterns and the files of `archive`, which it packs into one
compressed bundle uploaded next to them.  Under containers it runs in `python:3.11`
with only the log directory mounted (at /logs) and installs awscli there; on a bare
host it uses the `aws` on PATH and installs awscli only when there is none.  It writes
where it uploads to into `postprocess-status.json` first, so the upload carries it; its
output goes to `postprocess.log` at the top of the log directory.

The unit is not critical: a failed upload (exit code 11) is a failed unit in the journal
and the summary, never a change of the job's exit code.  Credentials come only from the
environment the step inherits from srtd (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_PROFILE`, ...): nothing secret is in the unit.  Every value
of the recipe that reaches the script is quoted.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from srtd._value import value_class
from srtd.cluster import Cluster
from srtd.context import LOGS_IN_CONTAINER, PlanContext
from srtd.errors import PlanError
from srtd.layout import Place, log_file
from srtd.plan._hosts import KILL_GRACE, UPLOAD_PHASE
from srtd.recipe import Recipe
from srtd.unit import Container, Unit, UnitKind

NAME = "postprocess"
LOG_NAME = "postprocess.log"  # srtctl's name for the upload's output
STATUS_NAME = "postprocess-status.json"
IMAGE = "python:3.11"
RUN_TIMEOUT = 600.0  # seconds for installing awscli and a whole sync, as srtctl gives it
UPLOAD_FAILED = 11  # the step's exit code when awscli cannot be had or an upload fails
DEFAULT_PREFIX = "srtslurm"

# srt-slurm's upload policy when neither layer names one: aiperf's per-interval scrapes
# (the metrics scraper keeps the same series) and the dashboards are not uploaded ...
_AIPERF_ROOTS = ("artifacts/*", "sa-bench_*/*")
_AIPERF_SCRAPES = ("server_metrics_export.jsonl", "server_metrics_export.json", "gpu_telemetry_export.jsonl")
DEFAULT_EXCLUDE: tuple[str, ...] = (
    *(f"{root}/{name}" for root in _AIPERF_ROOTS for name in (*_AIPERF_SCRAPES, "inputs.json")),
    "perf_dashboard_bundle/*",
    "perf_dashboard.json",
)
# ... and aiperf's per-request records go into the one compressed bundle.
DEFAULT_ARCHIVE: tuple[str, ...] = ("artifacts/**/profile_export.jsonl", "sa-bench_*/**/profile_export.jsonl")

# Packs the files matching the patterns (Python globs, `**` allowed) under a root into one
# bundle in a scratch directory: zstandard when it imports, else xz.  Prints the bundle's
# path, or nothing when no file matches.  Standard library only (plus zstandard).
_PACK = r"""
import glob, json, os, sys, tarfile
root, scratch, patterns = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
found = set()
for pattern in patterns:
    found.update(p for p in glob.glob(os.path.join(root, pattern), recursive=True) if os.path.isfile(p))
if not found:
    sys.stderr.write("archive: nothing matches %s\n" % ", ".join(patterns))
    sys.exit(0)
try:
    import zstandard
except ImportError:
    zstandard = None
if zstandard is not None:
    bundle = os.path.join(scratch, "bundle.tar.zst")
    with open(bundle, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as packed:
        with tarfile.open(fileobj=packed, mode="w|") as tar:
            for path in sorted(found):
                tar.add(path, arcname=os.path.relpath(path, root))
else:
    bundle = os.path.join(scratch, "bundle.tar.xz")
    with tarfile.open(bundle, "w:xz") as tar:
        for path in sorted(found):
            tar.add(path, arcname=os.path.relpath(path, root))
sys.stderr.write("archive: %d file(s) in %s\n" % (len(found), os.path.basename(bundle)))
print(bundle)
"""


@value_class
class Upload:
    """The effective `reporting.s3`: the recipe's fields over the cluster's."""

    bucket: str
    prefix: str
    region: str | None
    endpoint_url: str | None
    exclude: tuple[str, ...]
    archive: tuple[str, ...]

    def base(self) -> str:
        """The URL up to the day: `s3://<bucket>/<prefix>/`."""
        return f"s3://{self.bucket}/{self.prefix}/"


def upload_config(recipe: Recipe, cluster: Cluster) -> Upload | None:
    """`reporting.s3` of the cluster with the recipe's over it, field by field; None when neither has one."""
    reportings = (cluster.reporting, recipe.reporting)
    layers = [r.s3 for r in reportings if r is not None and r.s3 is not None]
    if not layers:
        return None
    fields: dict[str, Any] = {}
    for layer in layers:  # the cluster first, the recipe over it
        fields.update({name: getattr(layer, name) for name in layer.model_fields_set})
    bucket = fields.get("bucket")
    if not bucket:
        raise PlanError("reporting.s3 names no bucket: set reporting.s3.bucket in the recipe or the cluster settings")
    exclude, archive = fields.get("exclude"), fields.get("archive")
    return Upload(
        bucket=str(bucket),
        prefix=str(fields.get("prefix") or "").strip("/") or DEFAULT_PREFIX,
        region=fields.get("region"),
        endpoint_url=fields.get("endpoint_url"),
        exclude=DEFAULT_EXCLUDE if exclude is None else tuple(exclude),
        archive=DEFAULT_ARCHIVE if archive is None else tuple(archive),
    )


def postprocess_units(ctx: PlanContext, last_tier: int) -> list[Unit]:
    """The upload step, in the tier after `last_tier`; none without `reporting.s3`."""
    upload = upload_config(ctx.recipe, ctx.cluster)
    if upload is None:
        return []
    container = Container(image=IMAGE, mounts={ctx.log_dir: LOGS_IN_CONTAINER}) if ctx.containerized else None
    script = upload_script(upload, ctx.job_id, ctx.logs_path, install_zstandard=ctx.containerized)
    return [
        Unit(
            name=NAME,
            kind=UnitKind.BUILD,  # a one-shot step
            phase=UPLOAD_PHASE,
            nodes=(ctx.nodes.head,),
            argv=("bash", "-c", script),
            env=ctx.job_env(),
            container=container,
            log=log_file(ctx.cluster.log_layout, Place.JOB, LOG_NAME),
            critical=False,
            on_teardown=True,
            tier=last_tier + 1,
            run_timeout=RUN_TIMEOUT,
            terminate_timeout=KILL_GRACE,
        )
    ]


def upload_script(upload: Upload, job_id: str, logs: str, *, install_zstandard: bool) -> str:
    """The step's bash: the URL, awscli, the status file, the bundle, the sync, the bundle's copy, the count."""
    q = shlex.quote
    flags = [
        *(("--endpoint-url", upload.endpoint_url) if upload.endpoint_url else ()),
        *(("--region", upload.region) if upload.region else ()),
    ]
    aws = " ".join(["aws", *map(q, flags)])
    # the archive's files are left out of the sync: aws's `*` already crosses directories
    skipped = [*upload.exclude, *(p.replace("**", "*") for p in upload.archive)]
    excludes = "".join(f" --exclude {q(p)}" for p in skipped)
    # the status file's JSON around the day, which only the step knows (digits and dashes)
    lists = json.dumps({"exclude": list(upload.exclude), "archive": list(upload.archive)})[1:]
    head = '{"s3_url": ' + json.dumps(upload.base())[:-1]
    tail = json.dumps(f"/{job_id}/")[1:] + ", " + lists
    lines = [
        "set -u",
        "set -o pipefail",
        f"logs={q(logs)}",
        'day=$(date -u -r "$logs/plan.json" +%Y-%m-%d 2>/dev/null || date -u +%Y-%m-%d)  # the day the job started',
        f'url={q(upload.base())}"$day"/{q(job_id)}/',
        "if ! command -v aws >/dev/null 2>&1; then",
        '  echo "no aws on PATH: installing awscli"',
        f'  python3 -m pip install awscli || {{ echo "could not install awscli"; exit {UPLOAD_FAILED}; }}',
        "fi",
        f'printf "%s%s%s\\n" {q(head)} "$day" {q(tail)} > "$logs/{STATUS_NAME}"',
        'bundle=""',
        *_bundle_lines(upload.archive, install_zstandard),
        f'echo "syncing $logs to $url ({len(skipped)} exclude pattern(s))"',
        # --no-progress: one line per file in postprocess.log, not a progress meter's redraws
        f'if ! {aws} s3 sync --no-progress "$logs" "$url"{excludes}; then',
        '  echo "Upload failed"',
        f"  exit {UPLOAD_FAILED}",
        "fi",
        f'if [ -n "$bundle" ] && ! {aws} s3 cp --no-progress "$bundle" "$url$(basename "$bundle")"; then',
        '  echo "Archive upload failed"',
        f"  exit {UPLOAD_FAILED}",
        "fi",
        'echo "Upload complete: $url"',
        f'echo "$({aws} s3 ls --recursive "$url" | wc -l) objects under $url"',
    ]
    return "\n".join(lines) + "\n"


def _bundle_lines(archive: Sequence[str], install_zstandard: bool) -> list[str]:
    """Pack the `archive` files into a scratch directory (the log directory stays as it is)."""
    if not archive:
        return []
    install = (
        'python3 -m pip install zstandard || echo "no zstandard: the bundle is .tar.xz"' if install_zstandard else ""
    )
    lines = [install] if install else []
    return [
        *lines,
        "scratch=$(mktemp -d)",
        f'echo "packing {len(archive)} archive pattern(s)"',
        f'bundle=$(python3 -c {shlex.quote(_PACK)} "$logs" "$scratch" {shlex.quote(json.dumps(list(archive)))})'
        f' || {{ echo "packing the archive failed"; exit {UPLOAD_FAILED}; }}',
    ]
