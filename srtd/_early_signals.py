"""Stop signals that come while `srtd run` is still starting: kept, then handed to the supervisor.

Until the supervisor listens for SIGTERM, SIGINT, SIGHUP and SIGUSR1 (`srtd.supervisor.run`),
each would act by default: SIGUSR1 and SIGTERM end the process at once.  Slurm's early
warning (`--signal=B:USR1@N`) may come up to 60 s early, so for a short job it can arrive in
srtd's first second, and srtd would die before writing a line of its journal, leaving a job
that ran nothing and says nothing.  So `srtd run` calls `catch()` first thing: the handler
only notes the signal, and the supervisor's relay, once it listens, takes the notes and acts
on each as if it had just come.  A second Ctrl-C during startup still interrupts at once.

This module imports nothing but `signal`, so it is cheap to reach early.
"""

from __future__ import annotations

import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)

_pending: list[int] = []


def _note(signum: int, _frame: FrameType | None) -> None:
    if signum == signal.SIGINT and signal.SIGINT in _pending:
        raise KeyboardInterrupt  # Ctrl-C twice while starting: the user means it
    _pending.append(signum)


def catch() -> None:
    """From now on, note stop signals instead of dying of them (call from the main thread)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _note)


def take() -> list[int]:
    """The signals noted so far, in order, forgotten once taken."""
    taken = list(_pending)
    del _pending[: len(taken)]
    return taken
