"""Stop signals that come while `srtd run` is still starting: kept, then handed to the supervisor.

Until the supervisor listens for SIGTERM, SIGINT, SIGHUP and SIGUSR1 (`srtd.supervisor.run`),
each would act by default: SIGUSR1 and SIGTERM end the process at once.  Slurm's early
warning (`--signal=B:USR1@N`) may come up to 60 s early, so for a short job it can arrive in
srtd's first second, and srtd would die before writing a line of its journal, leaving a job
that ran nothing and says nothing.  So `srtd run` calls `catch()` first thing: the handler
only notes the signal, and the supervisor's relay, once it listens, takes the notes and acts
on each as if it had just come.  A second Ctrl-C during startup still interrupts at once.

Every `srtd` command starts the same way on a smaller scale: the command line's first act
(`srtd.cli.main`, before it imports anything heavy) is `note_interrupts()`, so a Ctrl-C while
srtd imports and parses its arguments is noted instead of raising `KeyboardInterrupt` in the
middle of some import (a traceback).  The command group then asks `take_interrupt()` before
the command runs (a noted one: `srtd: interrupted`, exit 130, nothing started) and hands
Ctrl-C back to Python (`raise_interrupts`) while it runs, where it is caught as one.

`srtd run` execs its supervisor once it has planned (`srtd/cli/_supervise.py`): right before,
`hand_over` blocks the stop signals, so one that comes during the exec waits, pending, instead
of killing the process before the new program has a handler; the new program's first act is
`take_over`, which notes them again, puts back the ones noted before and unblocks.

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


def _note_only(signum: int, _frame: FrameType | None) -> None:
    _pending.append(signum)


def note_interrupts() -> None:
    """From now on, note Ctrl-C (SIGINT) instead of raising `KeyboardInterrupt` (call from the main thread)."""
    signal.signal(signal.SIGINT, _note_only)


def noting_interrupts() -> bool:
    """Whether `note_interrupts` is in force."""
    return signal.getsignal(signal.SIGINT) is _note_only


def raise_interrupts() -> None:
    """Ctrl-C raises `KeyboardInterrupt` again, as in any Python program (call from the main thread)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def take_interrupt() -> bool:
    """Whether a Ctrl-C was noted; it is forgotten once taken (the other signals stay noted)."""
    if signal.SIGINT not in _pending:
        return False
    _pending[:] = [s for s in _pending if s != signal.SIGINT]
    return True


def catch() -> None:
    """From now on, note stop signals instead of dying of them (call from the main thread)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _note)


def take() -> list[int]:
    """The signals noted so far, in order, forgotten once taken."""
    taken = list(_pending)
    del _pending[: len(taken)]
    return taken


def hand_over() -> list[int]:
    """Before `srtd run` execs its supervisor: stop signals are blocked from now on (one that
    comes waits, pending, through the exec) and the ones noted so far are taken, for `take_over`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    return take()


def take_over(noted: list[int]) -> None:
    """The supervisor's process, first thing (or `srtd run` when its exec failed): stop signals
    are noted again, those noted before the exec come first, then the blocked ones come in."""
    catch()
    _pending[:0] = noted
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
