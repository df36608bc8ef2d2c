"""The cyclic garbage collector, paused while the supervisor's process starts.

Importing srtd's supervisor and reading a plan allocates tens of thousands of objects (the
modules' classes and functions, the plan's records) and hardly any garbage: the collector
ran about 64 times before a job's first launch, finding next to nothing, some 11 ms of a
start that is about 130 ms (issue #36).  `pause()` stops it as the process starts;
`resume()`, once the imports and the plan are in, moves everything the start made to the
permanent generation (`gc.freeze`: the job's later collections never walk it again) and
starts the collector.  Nothing is lost: what the start leaves as garbage is a few hundred
objects, kept.  Only `srtd run`'s own process pauses it (`srtd.cli.main`, the handover's
`python -m srtd.cli._supervise`); a caller's process (tests, programs) keeps its collector.
"""

from __future__ import annotations

import gc


class _Start:
    paused = False  # `pause` stopped the collector, and `resume` has not started it yet


def pause() -> None:
    """Stop the collector for the process's start (when it runs: a caller may have stopped it)."""
    if gc.isenabled():
        gc.disable()
        _Start.paused = True


def resume() -> None:
    """The start is over: what it made frozen, the collector started again (if `pause` stopped it)."""
    if _Start.paused:
        _Start.paused = False
        gc.freeze()
        gc.enable()
