"""The failure report: printed when a job fails, and kept as `<log_dir>/postmortem.txt`."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

from srtd._files import write_under
from srtd._value import value_class
from srtd.errors import FileRefused
from srtd.events import Event, JobView
from srtd.launch import ExitStatus
from srtd.supervisor._console import SummaryRow, render_table_text
from srtd.supervisor._tail import read_tail

TAIL_LINES = 50


@value_class
class UnitLog:
    unit: str
    path: Path


def _exit_text(code: int | None, signum: int | None) -> str:
    if code is None and signum is None:
        return "-"
    return ExitStatus(code, signum).describe()


def culprit_block(
    *,
    reason: str,
    culprit: str | None,
    view: JobView,
    fatal_line: str | None,
    log: Path | None,
    lines: int = TAIL_LINES,
) -> str:
    """The culprit, its exit code or matched line, and the last lines of its log."""
    out = [f"job failed: {reason}"]
    if culprit is not None:
        unit = view.units.get(culprit)
        if fatal_line is not None:
            out.append(f"culprit: {culprit}, fatal log line: {fatal_line}")
        elif unit is not None and (unit.exit_code is not None or unit.signal is not None):
            out.append(f"culprit: {culprit}, {_exit_text(unit.exit_code, unit.signal)}")
        elif unit is not None:
            out.append(f"culprit: {culprit}, {unit.reason or unit.state.value}")
        if log is not None and not log.exists():
            out.append(f"no log: {culprit} never started")
        elif log is not None:
            tail = read_tail(log, lines)
            out.append(f"last {len(tail)} lines of {log}:")
            out.extend(f"  | {line}" for line in tail)
    return "\n".join(out) + "\n"


def _stamp(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]


def timeline(events: Sequence[Event]) -> str:
    if not events:
        return ""
    t0 = events[0].ts
    out = []
    for e in events:
        subject = e.unit or "job"
        parts = [f"{_stamp(e.ts)} +{e.ts - t0:8.3f}s #{e.seq:<4} {subject}: {e.prev or '-'} -> {e.state}"]
        if e.exit_code is not None or e.signal is not None:
            parts.append(_exit_text(e.exit_code, e.signal))
        if e.attempt:
            parts.append(f"attempt {e.attempt}")
        if e.pid is not None:
            parts.append(f"pid {e.pid}")
        if e.reason:
            parts.append(e.reason)
        out.append("  ".join(parts))
    return "\n".join(out) + "\n"


def _log_space(events: Sequence[Event]) -> list[str]:
    """What the job said of its log file system's room (full, nearly full, room again)."""
    said = [e for e in events if e.unit is None and "log_space" in (e.detail or {})]
    return [f"log file system at {_stamp(e.ts)}: {e.reason}" for e in said]


def _nodes(events: Sequence[Event]) -> list[str]:
    """What the job found of its nodes: preflight verdicts, losses, replacements (docs/nodes.md);
    the job's own end, which may repeat a node's reason, is the `reason:` line above."""
    said = [e for e in events if e.unit is None and "node" in (e.detail or {}) and e.state == e.prev]
    return [f"node at {_stamp(e.ts)}: {e.reason}" for e in said]


def write_postmortem(
    path: Path,
    *,
    job: str,
    exit_code: int,
    reason: str,
    culprit: str | None,
    first_fatal: tuple[str, str] | None,
    view: JobView,
    rows: Sequence[SummaryRow],
    logs: Sequence[UnitLog],
    events: Sequence[Event],
) -> Path:
    sections = [
        f"srtd post-mortem: {job}",
        f"state: {view.state.value}, exit code {exit_code}",
        f"reason: {reason}",
        f"culprit: {culprit or '-'}",
        "first fatal log line: " + (f"{first_fatal[0]}: {first_fatal[1]}" if first_fatal is not None else "none"),
        *_log_space(events),
        *_nodes(events),
        "",
        render_table_text(rows, "units"),
    ]
    for log in logs:
        unit = view.units.get(log.unit)
        state = unit.state.value if unit is not None else "?"
        tail = read_tail(log.path, TAIL_LINES)
        sections.append(f"== {log.unit} ({state}) {log.path}: last {len(tail)} lines ==")
        sections.extend(tail)
        sections.append("")
    sections.append("== timeline ==")
    sections.append(timeline(events))
    write_under(path.parent, path, "\n".join(sections), error=FileRefused)
    return path
