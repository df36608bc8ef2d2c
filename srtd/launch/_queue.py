"""Slurm's queue from the outside: submitting srtd's batch jobs and asking about jobs.

`srtd submit` submits held (`submit_held`), freezes the recipe, then `release`s;
`srtd submit --wait` and `--attach` follow a job with `show_job` until it has ended;
`srtd ps` lists this user's jobs with `user_jobs` and picks srtd's by their mark.
Every call goes through `run_slurm_tool` (one helper, bounded, stdin closed).

**The mark.** Every job srtd submits carries the comment `srtd:1 {json}` (`MARK`),
the JSON holding the recipe's name, its variant and the job's log directory with `%j`
where the job id goes (the log dir is named after the job id, which sbatch has not
given yet when the comment is set).  `srtd ps` lists only jobs with this mark.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from srtd._value import value_class
from srtd.errors import JobRefused, LaunchError, SlurmUnreached, exit_for_signal
from srtd.launch._tool import ToolRun, run_slurm_tool

MARK = "srtd:1 "  # the start of the comment of every job srtd submits
JOB_ID_SLOT = "%j"  # in the mark's log_dir: the job id
# Slurm's states of a job that has ended (anything else is pending, running or on its way out)
ENDED_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
)
_SEP = "\x1f"  # squeue's field separator in `user_jobs` (no name, path or comment holds it)
_FIELDS = ("%i", "%T", "%j", "%u", "%N", "%B", "%r", "%k")  # id, state, name, user, nodes, batch host, reason, comment


def _checked(done: ToolRun, what: str) -> str:
    if done.missing:
        raise LaunchError(f"{done.err}: srtd needs Slurm's client tools")
    if not done.ok:
        raise LaunchError(f"{what} failed: {done.said()}")
    return done.out


def mark_comment(*, name: str, variant: str | None, log_dir: str) -> str:
    """The comment that marks a job as srtd's (`log_dir` with `%j` for the job id)."""
    return MARK + json.dumps({"name": name, "variant": variant, "log_dir": log_dir}, separators=(",", ":"))


def read_mark(comment: str, job_id: str) -> dict[str, Any] | None:
    """The mark's fields (log_dir with the job id filled in), or None for a job srtd did not submit."""
    if not comment.startswith(MARK):
        return None
    try:
        data = json.loads(comment[len(MARK) :])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("log_dir"), str):
        data["log_dir"] = data["log_dir"].replace(JOB_ID_SLOT, job_id)
    return data


def submit_held(
    script: str, *, output: str, chdir: Path, name: str, comment: str | None = None, extra: Sequence[str] = ()
) -> str:
    """`sbatch --hold` of `script` (with `extra` options, e.g. `--exclude=`); the job id.

    `name` is only for the error message: `SlurmUnreached` when slurmctld never answered,
    `JobRefused` when it refused.
    """
    argv = ["sbatch", "--parsable", "--hold", f"--output={output}", f"--chdir={chdir}", *extra]
    if comment is not None:
        argv.append(f"--comment={comment}")
    done = run_slurm_tool(argv, input=script.encode())
    if done.missing:
        raise LaunchError(f"{done.err}: srtd submit needs Slurm's client tools")
    if not done.ok:
        if done.unreached is not None:
            raise SlurmUnreached(f"sbatch of {name} did not reach slurmctld: {done.unreached}")
        raise JobRefused(f"sbatch refused {name}: {done.said()}")
    return done.out.strip().split(";")[0]


def release_job(job_id: str) -> None:
    _checked(run_slurm_tool(["scontrol", "release", job_id]), f"scontrol release {job_id}")


def cancel_job(job_id: str) -> None:
    _checked(run_slurm_tool(["scancel", job_id]), "scancel")


def show_job(job_id: str) -> dict[str, str] | None:
    """`scontrol show job`'s `Key=Value` fields of one job; None when Slurm does not answer or know it."""
    done = run_slurm_tool(["scontrol", "--oneliner", "show", "job", job_id])
    if not done.ok:
        return None
    return {m.group(1): m.group(2) for m in re.finditer(r"(\w+)=(\S*)", done.out)}


def slurm_exit_code(fields: Mapping[str, str]) -> int:
    """A job's exit code from `ExitCode=status:signal` (128 + N when killed by signal N)."""
    status, _, sig = fields.get("ExitCode", "0:0").partition(":")
    if sig.isdigit() and int(sig):
        return exit_for_signal(int(sig))
    return int(status) if status.isdigit() else 1


@value_class
class SlurmJob:
    """One job as squeue lists it."""

    job_id: str
    state: str  # Slurm's: PENDING, RUNNING, COMPLETED, ...
    name: str
    user: str
    nodes: str  # the node list ("" while pending)
    batch_host: str  # where the batch script (srtd run) runs ("" while pending)
    reason: str  # why it is pending, or None
    comment: str

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def mark(self) -> dict[str, Any] | None:
        return read_mark(self.comment, self.job_id)


def _parse_jobs(text: str) -> list[SlurmJob]:
    jobs = []
    for line in text.splitlines():
        parts = line.split(_SEP, len(_FIELDS) - 1)
        if len(parts) != len(_FIELDS):
            continue
        values = ["" if p in ("(null)", "n/a", "None") else p for p in parts]
        jobs.append(SlurmJob(*values))
    return jobs


def user_jobs(job_ids: Sequence[str] = ()) -> list[SlurmJob]:
    """This user's jobs Slurm still knows (pending, running, recently ended), or just `job_ids` of them."""
    argv = ["squeue", "--me", "--states=all", "--noheader", f"--format={_SEP.join(_FIELDS)}"]
    if job_ids:
        argv.append(f"--jobs={','.join(job_ids)}")
    done = run_slurm_tool(argv)
    if not done.ok:
        if job_ids and "Invalid job id" in done.said():
            return []  # Slurm has forgotten them
        _checked(done, "squeue")
    return _parse_jobs(done.out)


def find_job(job_id: str) -> SlurmJob | None:
    """Job `job_id` if it is this user's and Slurm still knows it."""
    found = [j for j in user_jobs([job_id]) if j.job_id == job_id]
    return found[0] if found else None


def wait_ended(job_ids: Sequence[str], interval: float = 1.0) -> dict[str, dict[str, str] | None]:
    """Poll `scontrol show job` until every job has ended: each one's last fields (None: Slurm forgot it)."""
    pending = list(job_ids)
    outcome: dict[str, dict[str, str] | None] = {}
    while pending:
        for job_id in list(pending):
            fields = show_job(job_id)
            if fields is not None and fields.get("JobState") not in ENDED_STATES:
                continue
            outcome[job_id] = fields
            pending.remove(job_id)
        if pending:
            time.sleep(interval)
    return outcome
