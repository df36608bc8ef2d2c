"""Plans by hand, helper-program units, marker files and the process-table scan."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srtd.events import Event, JobView
from srtd.unit import Condition, Edge, Plan, Readiness, Unit, UnitKind

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
UNITPROG = PROGRAMS / "unitprog.py"
RUN_PLAN = PROGRAMS / "run_plan.py"


def prog_argv(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-S", str(UNITPROG), *args)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def edge(unit: str, condition: str = "ready") -> Edge:
    return Edge(unit=unit, condition=Condition(condition))


@dataclass
class PlanMaker:
    """Builds units that run `unitprog.py` with a marker file each, and plans of them."""

    root: Path
    token: str
    units: list[Unit] = field(default_factory=list)

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def marker(self, name: str) -> Path:
        return self.root / "markers" / f"{name}.jsonl"

    def unit(
        self,
        name: str,
        *args: str,
        after: Iterable[Edge] = (),
        readiness: Readiness | None = None,
        marker: bool = True,
        argv: tuple[str, ...] | None = None,
        **fields: Any,
    ) -> Unit:
        (self.root / "markers").mkdir(parents=True, exist_ok=True)
        extra = ("--marker", str(self.marker(name))) if marker else ()
        unit = Unit(
            name=name,
            kind=fields.pop("kind", UnitKind.SERVICE),
            phase=fields.pop("phase", "test"),
            nodes=fields.pop("nodes", ("node0",)),
            argv=argv if argv is not None else prog_argv(*args, *extra, "--tag", self.token),
            log=fields.pop("log", f"{name}.log"),
            after=tuple(after),
            readiness=readiness,
            env={"SRTD_TEST_TOKEN": self.token, **fields.pop("env", {})},
            **fields,
        )
        self.units.append(unit)
        return unit

    def plan(self, *units: Unit, hold: bool = False, name: str = "test") -> Plan:
        chosen = units or tuple(self.units)
        return Plan(
            name=name,
            job_id="local-1",
            local=True,
            log_dir=str(self.log_dir),
            nodes={"head": ("node0",)},
            allocation=("node0",),
            phases=("test",),
            units=tuple(chosen),
            hold=hold,
        )

    def marks(self, name: str) -> list[dict[str, Any]]:
        path = self.marker(name)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def first(self, name: str, event: str, attempt: int | None = None) -> dict[str, Any]:
        for mark in self.marks(name):
            if mark["event"] == event and (attempt is None or mark["attempt"] == attempt):
                return mark
        raise AssertionError(f"{name}: no {event!r} mark (attempt {attempt}) in {self.marks(name)}")


def leftover_processes(token: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose argv or environment carries `token`."""
    found: list[tuple[int, str]] = []
    needle = token.encode()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
            if state in (b"Z", b"X"):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                environ = b""
        except OSError:
            continue
        if needle in cmdline or needle in environ:
            found.append((pid, cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def assert_no_leftovers(token: str, wait: float = 3.0) -> None:
    deadline = time.monotonic() + wait
    while True:
        left = leftover_processes(token)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"processes left behind: {left}"


def check_journal(path: Path, unit_names: Iterable[str]) -> list[Event]:
    """The journal's invariants: seq 1.. without gaps, starts and ends with a job event,
    every launched unit reaches a final state, and the fold equals the replay."""
    from srtd.supervisor import read_journal

    events = read_journal(path)
    assert events, "empty journal"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].unit is None
    assert events[0].state == "starting"
    assert events[-1].unit is None
    assert events[-1].state in ("succeeded", "failed", "cancelled")
    view = JobView.fold(events, list(unit_names))
    for name, unit in view.units.items():
        launched = any(e.unit == name and e.state == "starting" for e in events)
        if launched:
            assert unit.state.value in ("stopped", "failed"), f"{name} ended in {unit.state}"
    ts = [e.ts for e in events]
    assert ts == sorted(ts)
    return events


def journal_so_far(log_dir: Path) -> list[Event]:
    """The events a running job has written so far."""
    path = log_dir / "events.jsonl"
    if not path.exists():
        return []
    return [Event.from_line(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(log_dir: Path, predicate: Callable[[list[Event]], bool], timeout: float = 60.0) -> list[Event]:
    """Poll a running job's journal until `predicate` holds; the events then.  Fails at once if the job ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = journal_so_far(log_dir)
        if predicate(seen):
            return seen
        if any(e.unit is None and e.state in ("succeeded", "failed", "cancelled") for e in seen):
            break
        time.sleep(0.05)
    raise AssertionError(f"timed out; journal: {[(e.unit, e.state) for e in journal_so_far(log_dir)]}")


def states(events: Iterable[Event], unit: str | None) -> list[str]:
    return [e.state for e in events if e.unit == unit]


def assert_cancelled_by_sigint(returncode: int | None, out: str, log_dir: Path) -> None:
    """A job stopped with Ctrl-C: exit 130, a complete journal ending `cancelled`, nothing left running."""
    assert returncode == 128 + signal.SIGINT, out
    journal = check_journal(log_dir / "events.jsonl", [])
    assert journal[-1].state == "cancelled"
    assert_no_leftovers(str(log_dir))
