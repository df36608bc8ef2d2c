"""Result publishers (`reporting.publishers`): commands that take the checked results after a job.

An `AfterJobHook` for the supervisor: once a job has succeeded (its results passed the
gate) and its units are down, every publisher of the plan runs in turn on srtd's own
host, with the publication document as JSON on its stdin, its stdout and stderr in its
log, and its environment srtd's (credentials come from there, never from the recipe).
Each publisher's outcome is a journal event; one that exits non-zero or runs past its
timeout fails the job with `EXIT_PUBLISH`.  A command that is not installed is a warning
and changes nothing, so a recipe that names a publisher still runs where it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from srtd._files import OUTPUT_LIMIT, open_file, read_back
from srtd.errors import EXIT_PUBLISH, FileRefused
from srtd.results import RESULTS_NAME
from srtd.supervisor import AfterJob, AfterJobFailure
from srtd.unit import Plan, Publisher

PUBLISH_FORMAT = 1
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL of a publisher past its timeout


def publication(plan: Plan, log_dir: Path, results: Any) -> dict[str, Any]:
    """The document every publisher reads on stdin (docs/results.md, "Publishing results")."""
    return {
        "format": PUBLISH_FORMAT,
        "job": plan.name,
        "job_id": plan.job_id,
        "variant": plan.variant,
        "recipe": plan.recipe,
        "log_dir": str(log_dir),
        "results": results,
    }


def _missing(argv0: str) -> bool:
    return shutil.which(argv0) is None


async def _kill(process: anyio.abc.Process) -> None:
    # its own session: the whole group goes, grandchildren too
    for sig, grace in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, None)):
        with suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        if grace is None:
            break
        with anyio.move_on_after(grace):
            await process.wait()
            return
    await process.wait()


async def run_publisher(publisher: Publisher, document: bytes, log: Path) -> tuple[str, int | None, float]:
    """Run one publisher: (outcome `ok` / `failed` / `timeout`, its exit code, seconds)."""
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(open_file(log, append=True, keep=True, error=FileRefused), "ab") as out:
        process = await anyio.open_process(
            list(publisher.argv), stdin=subprocess.PIPE, stdout=out, stderr=out, start_new_session=True
        )
        async with process:
            assert process.stdin is not None
            code: int | None = None
            # the timeout covers the write too: a publisher that never reads must not hang srtd
            with anyio.move_on_after(publisher.timeout_seconds) as scope:
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.send(document)  # one that reads nothing closes its end
                await process.stdin.aclose()
                code = await process.wait()
            if scope.cancelled_caught:
                await _kill(process)
                return "timeout", process.returncode, time.monotonic() - started
    return ("ok" if code == 0 else "failed"), code, time.monotonic() - started


def _results(log_dir: Path) -> Any:
    try:
        return json.loads(read_back(log_dir / RESULTS_NAME, limit=OUTPUT_LIMIT, error=ValueError))
    except (OSError, ValueError):
        return None


async def publish_results(job: AfterJob) -> AfterJobFailure | None:
    """Every publisher of the plan, in order; the first that fails decides the job's end."""
    if not job.plan.publishers:
        return None
    results = await anyio.to_thread.run_sync(_results, job.log_dir)
    if results is None:
        job.note(f"no {RESULTS_NAME} to publish; publishers skipped", {"publishers": "skipped"})
        return None
    document = (json.dumps(publication(job.plan, job.log_dir, results), indent=2) + "\n").encode()
    failure: AfterJobFailure | None = None
    for publisher in job.plan.publishers:
        log = job.log_dir / publisher.log
        detail: dict[str, Any] = {"name": publisher.name, "log": publisher.log}
        if _missing(publisher.argv[0]):
            detail["outcome"] = "missing"
            job.note(
                f"publisher {publisher.name}: {publisher.argv[0]!r} is not installed; not published",
                {"publisher": detail},
            )
            continue
        try:
            outcome, code, seconds = await run_publisher(publisher, document, log)
        except OSError as e:  # not executable, its log cannot be written
            outcome, code, seconds = "failed", None, 0.0
            detail["error"] = str(e)
        detail.update(outcome=outcome, exit_code=code, seconds=round(seconds, 3))
        reason = _reason(publisher, outcome, code, detail.get("error"))
        job.note(reason, {"publisher": detail})
        if outcome != "ok" and failure is None:
            failure = AfterJobFailure(EXIT_PUBLISH, f"results not published: {reason}", {"publisher": detail})
    return failure


def _reason(publisher: Publisher, outcome: str, code: int | None, error: str | None) -> str:
    what = f"publisher {publisher.name}"
    if outcome == "ok":
        return f"{what}: published"
    if outcome == "timeout":
        return f"{what}: killed after its timeout of {publisher.timeout_seconds:g} s (log {publisher.log})"
    if error is not None:
        return f"{what}: could not start: {error}"
    return f"{what}: exited with code {code} (log {publisher.log})"


__all__ = ["PUBLISH_FORMAT", "publication", "publish_results", "run_publisher"]
