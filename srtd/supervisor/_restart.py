"""Restart bookkeeping: how many, how long to back off, where the crashed log goes.

`max_restarts` counts over the whole job.  The backoff of restart n within a streak is
`backoff_seconds * 2**(n-1)` capped at `max_backoff_seconds` (`Restart.backoff`); the
streak starts over once an attempt has run cleanly (ready, if it has a probe) for
`stable_seconds`.
"""

from __future__ import annotations

from pathlib import Path

from srtd._value import value_class
from srtd.unit import Restart, RestartMode


def rotated_log(path: Path, restart_number: int) -> Path:
    """Where the log of the attempt before restart n is kept: `<log>.<n>`."""
    return path.with_name(f"{path.name}.{restart_number}")


@value_class(frozen=False, slots=True)
class RestartTracker:
    policy: Restart
    count: int = 0  # restarts scheduled so far, over the job
    streak: int = 0  # restarts since the unit last ran stably

    def wants(self, failed: bool) -> bool:
        """Does the policy ask for a restart after an attempt that `failed` (or not)?"""
        if self.policy.policy is RestartMode.ALWAYS:
            return True
        if self.policy.policy is RestartMode.ON_FAILURE:
            return failed
        return False

    @property
    def exhausted(self) -> bool:
        return self.count >= self.policy.max_restarts

    def schedule(self, ran_clean_for: float | None) -> float:
        """Count one more restart and return its backoff delay in seconds."""
        if ran_clean_for is not None and ran_clean_for >= self.policy.stable_seconds:
            self.streak = 0
        self.count += 1
        self.streak += 1
        return self.policy.backoff(self.streak)
