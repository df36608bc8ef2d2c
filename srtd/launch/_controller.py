"""slurmctld away for a while: tell its silence from a refusal, retry with backoff, say it once.

Measured on the dev cluster (docs/failures.md#slurmctld-away): while slurmctld is frozen
or stopped, running steps go on (srun and slurmstepd talk directly), but every call that
needs the controller fails after MessageTimeout, and says so only in its output:

- `srun` exits 1 with `Unable to confirm allocation for job J: Socket timed out on
  send/recv operation` (or `Unable to create step ...`); no task was started;
- `scancel` prints `slurm_load_jobs error: Socket timed out ...` and exits **0**, without
  delivering the signal;
- `squeue` and `scontrol` exit 1 after two MessageTimeouts.

So the launcher reads that output for Slurm's communication errors (`COMMUNICATION_ERRORS`,
the one table of them), retries the call with `backoff`, and `Controller` says once that
the controller does not answer and once that it answers again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import anyio

from srtd._structlog import get_logger
from srtd.launch._tool import (
    TOOL_TIMEOUT,
    ToolRun,
    communication_error,
    slurm_tool,
)

log = get_logger("srtd.launch")

# srun's words when it failed before any task started: a new srun is not a second launch.
SRUN_BEFORE_STEP = ("Unable to confirm allocation for job", "Unable to create step for job")

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 10.0
PATIENCE = 600.0  # seconds a call is retried while the controller stays silent


def srun_never_reached(text: str) -> str | None:
    """srun's line saying it could not create its step because the controller did not answer."""
    for line in text.splitlines():
        if any(words in line for words in SRUN_BEFORE_STEP) and communication_error(line):
            return line.strip()
    return None


def backoff(first: float = BACKOFF_FIRST, ceiling: float = BACKOFF_MAX) -> Iterator[float]:
    """1, 2, 4, 8, 10, 10, ... seconds."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, ceiling)


class Controller:
    """Whether slurmctld answers, as the launcher's calls found; each change said once."""

    def __init__(self, now: Callable[[], float] = anyio.current_time, patience: float = PATIENCE) -> None:
        self.now = now
        self.patience = patience
        self.silent_since: float | None = None

    @property
    def reachable(self) -> bool:
        return self.silent_since is None

    def silent(self, evidence: str, since: float | None = None) -> None:
        """A call that began at `since` (default: now) got no answer."""
        if self.silent_since is None:
            self.silent_since = self.now() if since is None else since
            log.warning(
                f"slurmctld does not answer ({evidence}); srtd keeps supervising what runs "
                "and retries its Slurm calls until it answers"
            )

    def answered(self) -> None:
        if self.silent_since is not None:
            away = self.now() - self.silent_since
            self.silent_since = None
            log.warning(f"slurmctld answers again (after {away:.0f} s)")

    def gave_up(self, since: float) -> bool:
        """True once a call first refused at `since` has been retried for `patience` seconds."""
        return self.now() - since >= self.patience

    async def call(
        self, argv: Sequence[str], *, timeout: float = TOOL_TIMEOUT, done: Callable[[], bool] = lambda: False
    ) -> ToolRun:
        """Run a Slurm command; while the controller does not answer, retry it with backoff.

        Until it reaches the controller, `done()` says the call is moot (the step it
        signals has ended), or `patience` has passed; the last result either way.
        """
        since = self.now()
        for delay in backoff():
            began = self.now()
            result = await slurm_tool(argv, timeout)
            evidence = result.unreached
            if evidence is None:
                self.answered()
                return result
            self.silent(f"{Path(argv[0]).name}: {evidence}", since=began)
            if done() or self.gave_up(since):
                return result
            await anyio.sleep(delay)
        raise AssertionError("backoff() never ends")


async def list_steps(
    job_id: str, squeue: str = "squeue", controller: Controller | None = None
) -> dict[str, str] | None:
    """`{step id: step name}` of the job's steps Slurm still lists; None if squeue failed.

    With a `controller`, squeue is retried while slurmctld does not answer (see `Controller.call`).
    """
    argv = [squeue, "--steps", f"--jobs={job_id}", "--noheader", "--format=%i %j"]
    done = await (controller.call(argv) if controller is not None else slurm_tool(argv))
    if not done.ok:
        return None
    steps: dict[str, str] = {}
    for line in done.out.splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2:
            steps[parts[0]] = parts[1].strip()
    return steps


def parse_duration(text: str) -> int | None:
    """Seconds in a Slurm duration (`[days-][[hours:]minutes:]seconds`); None if it is not one."""
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        if not head.isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return days * 86400 + seconds
