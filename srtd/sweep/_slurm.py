"""The queue seam of `srtd sweep`: submit (excluding blamed nodes), the state of jobs, cancel.

`Queue` is what the follow loop needs; `SlurmQueue` is it on a real cluster, with the
submission itself handed in by the command (it is `srtd submit`'s, frozen recipe and
all).  Where a job has left `squeue`, `sacct` says how it ended when the cluster keeps
accounting, `scontrol show job` while slurmctld still remembers it; a job none of them
knows is "forgotten" and judged by its journal alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from srtd._value import value_class
from srtd.sweep._classify import Facts
from srtd.sweep._facts import has_results, journal_end, postmortem_line

if TYPE_CHECKING:
    from srtd.sweep._follow import Point
    from srtd.sweep._manifest import JobRecord


@value_class
class SlurmView:
    state: str  # Slurm's, upper case
    nodes: tuple[str, ...] = ()
    exit_code: int | None = None  # sacct's or scontrol's, once ended

    @property
    def ended(self) -> bool:
        from srtd.launch import ENDED_STATES

        return self.state in ENDED_STATES


class Queue(Protocol):
    def submit(self, point: Point, exclude: Sequence[str]) -> tuple[str, str]:
        """Submit the point's job (never on `exclude`): its job id and log directory."""

    def states(self, job_ids: Sequence[str]) -> dict[str, SlurmView]:
        """Slurm's view of the jobs it still lists (a job left out has been forgotten)."""

    def facts(self, job: JobRecord, view: SlurmView | None) -> Facts:
        """Everything known of an ended job, for the classification."""

    def cancel(self, job_id: str) -> None: ...


def expand_nodes(text: str) -> tuple[str, ...]:
    """Slurm's node list (`node[1-2],gpu3`) as names; `scontrol show hostnames` does the work."""
    if not text or text in ("None", "(null)"):
        return ()
    from srtd.launch import run_slurm_tool

    done = run_slurm_tool(["scontrol", "show", "hostnames", text])
    return tuple(done.out.split()) if done.ok else (text,)


def _sacct(job_id: str) -> SlurmView | None:
    from srtd.launch import run_slurm_tool, slurm_exit_code

    done = run_slurm_tool(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,State,NodeList,ExitCode"])
    if not done.ok:  # no accounting on this cluster (or slurmdbd away)
        return None
    for line in done.out.splitlines():
        parts = line.split("|")
        if len(parts) == 4 and parts[0] == job_id and parts[1]:
            return SlurmView(parts[1].split()[0], expand_nodes(parts[2]), slurm_exit_code({"ExitCode": parts[3]}))
    return None


def ended_view(job_id: str) -> SlurmView | None:
    """How Slurm says an ended job ended: sacct, else scontrol; None when forgotten."""
    from srtd.launch import show_job, slurm_exit_code

    found = _sacct(job_id)
    if found is not None:
        return found
    fields = show_job(job_id)
    if fields is None or "JobState" not in fields:
        return None
    return SlurmView(fields["JobState"], expand_nodes(fields.get("NodeList", "")), slurm_exit_code(fields))


class SlurmQueue:
    """`Queue` on the cluster this login node talks to."""

    def __init__(self, submit: Callable[[Point, Sequence[str]], tuple[str, str]]) -> None:
        self._submit = submit

    def submit(self, point: Point, exclude: Sequence[str]) -> tuple[str, str]:
        return self._submit(point, exclude)

    def states(self, job_ids: Sequence[str]) -> dict[str, SlurmView]:
        from srtd.launch import user_jobs

        if not job_ids:
            return {}
        # the node list stays Slurm's text here (one squeue a pass); `facts` expands it once the job ended
        return {j.job_id: SlurmView(j.state, (j.nodes,) if j.nodes else ()) for j in user_jobs(job_ids)}

    def facts(self, job: JobRecord, view: SlurmView | None) -> Facts:
        if view is None or view.state in ("COMPLETING", "CANCELLED", "COMPLETED", "FAILED"):
            view = ended_view(job.job_id) or view  # accounting's word is the last one
        elif len(view.nodes) == 1:
            view = SlurmView(view.state, expand_nodes(view.nodes[0]), view.exit_code)
        log_dir = Path(job.log_dir)
        end = journal_end(log_dir)
        return Facts(
            slurm_state=view.state if view is not None else None,
            nodes=view.nodes if view is not None else (),
            end_state=end.state if end is not None else None,
            exit_code=end.exit_code if end is not None else (view.exit_code if view is not None else None),
            reason=end.reason if end is not None else None,
            time_limit=end.time_limit if end is not None else False,
            results=has_results(log_dir),
            postmortem=postmortem_line(log_dir),
        )

    def cancel(self, job_id: str) -> None:
        from srtd.launch import cancel_job

        cancel_job(job_id)
