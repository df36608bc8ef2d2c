"""The supervisor: executes a `Plan`, event-driven, in one anyio process.

Public surface:

- `supervise(plan, launcher, *, stop, services, **JobOptions) -> JobResult`
- `run(plan, launcher, *, explain, services, **JobOptions) -> int` (sync, signals)
- `JobOptions`: the keyword arguments both take (`log_dir`, `clock`, `http_transport`,
  `console`, `log_watch`, `after_job`)
- `AfterJob`, `AfterJobFailure`, `AfterJobHook`: what runs after a job that succeeded (the result publishers)
- `Service`: something that runs beside a job (the attach server), given its `ServicePort`
- `Preflight`: how the nodes are checked before any unit launches (docs/nodes.md);
  `node_checks`: what each node's check runs (light: the plan's types only)
- `Stop`: a stop request (what signal handlers set)
- `JobResult`: how the job ended
- test seams: `Clock`, `SystemClock`, `ScaledClock`; `Console`, `TerminalConsole`,
  `NullConsole`; `Journal` (subscribe to live events), `read_journal`; `Tailer`,
  `LogLine`, `read_tail`

See docs/supervisor.md and docs/events.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srtd._lazy import lazy_attributes

if TYPE_CHECKING:
    from srtd.supervisor._after import AfterJob, AfterJobFailure, AfterJobHook
    from srtd.supervisor._clock import Clock, ScaledClock, SystemClock
    from srtd.supervisor._console import (
        Console,
        JsonConsole,
        NullConsole,
        ProgressRow,
        SummaryRow,
        TerminalConsole,
        event_message,
    )
    from srtd.supervisor._end import POSTMORTEM_NAME, JobResult
    from srtd.supervisor._job import Job, JobOptions, Service, check_plan, supervise
    from srtd.supervisor._journal import JOURNAL_NAME, Journal, read_journal
    from srtd.supervisor._live import LiveConsole
    from srtd.supervisor._port import ServicePort
    from srtd.supervisor._preflight_argv import Preflight, node_checks
    from srtd.supervisor._probes import ProbeResult, check, count, evaluate_workers
    from srtd.supervisor._run import STOP_SIGNALS, relay_signals, run
    from srtd.supervisor._tail import LogLine, Tailer, read_tail
    from srtd.supervisor._teardown import Stop

# public name -> its module: the face loads a module on first use, so `srtd ps` reading a
# journal (`read_journal`) does not import the consoles' rich and structlog
_LAZY = {
    **dict.fromkeys(("AfterJob", "AfterJobFailure", "AfterJobHook"), "_after"),
    **dict.fromkeys(("Clock", "ScaledClock", "SystemClock"), "_clock"),
    **dict.fromkeys(
        ("Console", "JsonConsole", "NullConsole", "ProgressRow", "SummaryRow", "TerminalConsole"),
        "_console",
    ),
    "event_message": "_console",
    "LiveConsole": "_live",
    **dict.fromkeys(("Job", "JobOptions", "Service", "check_plan", "supervise"), "_job"),
    **dict.fromkeys(("JOURNAL_NAME", "Journal", "read_journal"), "_journal"),
    **dict.fromkeys(("POSTMORTEM_NAME", "JobResult"), "_end"),
    "ServicePort": "_port",
    **dict.fromkeys(("Preflight", "node_checks"), "_preflight_argv"),
    **dict.fromkeys(("ProbeResult", "check", "count", "evaluate_workers"), "_probes"),
    **dict.fromkeys(("STOP_SIGNALS", "relay_signals", "run"), "_run"),
    **dict.fromkeys(("LogLine", "Tailer", "read_tail"), "_tail"),
    "Stop": "_teardown",
}

__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "JOURNAL_NAME",
    "POSTMORTEM_NAME",
    "STOP_SIGNALS",
    "AfterJob",
    "AfterJobFailure",
    "AfterJobHook",
    "Clock",
    "Console",
    "Job",
    "JobOptions",
    "JobResult",
    "Journal",
    "JsonConsole",
    "LiveConsole",
    "LogLine",
    "NullConsole",
    "Preflight",
    "ProbeResult",
    "ProgressRow",
    "ScaledClock",
    "Service",
    "ServicePort",
    "Stop",
    "SummaryRow",
    "SystemClock",
    "Tailer",
    "TerminalConsole",
    "check",
    "check_plan",
    "count",
    "evaluate_workers",
    "event_message",
    "node_checks",
    "read_journal",
    "read_tail",
    "relay_signals",
    "run",
    "supervise",
]
