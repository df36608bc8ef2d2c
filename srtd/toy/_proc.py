"""Process plumbing shared by the toy programs: log lines, stop signals, simulated crashes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import anyio
import anyio.abc
import click

F = TypeVar("F", bound=Callable[..., Any])

#: The signals that ask a toy program to stop gracefully.  Slurm's `scancel` and srtd's
#: teardown send SIGTERM; a person at a terminal sends SIGINT with Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: The signals a toy program answers with one line saying what it is doing, and goes on.
#: A real server reloads its settings or reopens its logs on SIGHUP; a toy has neither,
#: and without a handler Python's default would end it, so `srtd signal JOB UNIT HUP`
#: (docs/attach.md) would kill the unit instead of showing that the signal arrived.
STATUS_SIGNALS = (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def seconds_option(flag: str, default: float | None, help: str, *, minimum: float = 0.0) -> Callable[[F], F]:
    """A `--flag SECONDS` option: a non-negative (or at least `minimum`) number of seconds."""
    return click.option(
        flag,
        type=click.FloatRange(min=minimum),
        default=default,
        show_default=default is not None,
        metavar="SECONDS",
        help=help,
    )


class Say:
    """Prints ``<prog>: <message>`` lines to stdout, flushed at once.

    Flushing every line matters: stdout is a pipe or a file under srtd and Slurm, so
    without it a readiness line could sit in a buffer while a log probe waits for it.
    """

    def __init__(self, prog: str) -> None:
        self.prog = prog

    def __call__(self, message: str) -> None:
        # Whoever read our stdout may be gone (or it was closed); the program itself
        # must keep serving, so a lost log line is not an error.
        with contextlib.suppress(BrokenPipeError, ValueError):
            print(f"{self.prog}: {message}", flush=True)


class StopRequest:
    """What the signal watcher learned: the first stop signal, and whether one came again.

    The first SIGTERM/SIGINT starts a graceful drain; a second one (Ctrl-C twice) cuts
    the drain short.
    """

    def __init__(self) -> None:
        self.requested = anyio.Event()
        self.again = anyio.Event()
        self.signal_name = ""

    async def watch(self, signals: AsyncIterator[signal.Signals]) -> None:
        """Consume `signals` (from `anyio.open_signal_receiver`) until cancelled."""
        async for signum in signals:
            if not self.requested.is_set():
                self.signal_name = signal.Signals(signum).name
                self.requested.set()
            else:
                self.again.set()


async def answer_status_signals(
    say: Say, status: Callable[[], str], *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Until cancelled: each status signal gets the line `received SIGHUP, going on: STATUS`.

    Start it with `TaskGroup.start`: once that returns, the signals are caught.
    """
    with anyio.open_signal_receiver(*STATUS_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            say(f"received {signal.Signals(signum).name}, going on: {status()}")


def format_address(host: str, port: int) -> str:
    """`host:port`, with an IPv6 literal in brackets so the port stays unambiguous."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def crash(code: int) -> None:
    """Exit at once with `code`, skipping every cleanup, like a process that dies.

    Used for `--fail-after` / `--fail-on-start`: a real engine that crashes does not
    drain its requests or close its sockets politely, and the demo should not either.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)
