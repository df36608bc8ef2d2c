"""Strays: processes of a local unit that left its process group, found and ended at teardown.

A unit runs in its own session and is stopped by signalling its process group.  A
descendant that calls setsid() (a daemonizing program, `setsid cmd &`) or setpgid() leaves
that group; without more, it is reparented to init when its parent ends and outlives the
job unseen.  So while the local launcher runs units, srtd is a *child subreaper*
(`PR_SET_CHILD_SUBREAPER`, Linux 3.4+): an orphaned descendant of a unit is reparented to
srtd instead, and stays findable as one of srtd's children.

A child of srtd is the launcher's to end only when it came from a unit, never merely
because it is a child (srtd may run inside a test or another program whose own children
are not its business).  It came from a unit when its session or process group is one a
unit attempt (or a stray already found) started in, or when its environment names a unit
this launcher started (`SRTD_UNIT`: every unit's environment carries it and descendants
inherit it; this is how a setsid() escapee, in a session of its own, is told apart).
Such a child is one of:

- a *stray*: alive and outside every group srtd has ended.  The teardown reports it
  (`Launcher.end_strays`), sends SIGTERM (and SIGCONT) to it, or to its group if it leads one,
  then SIGKILL after its unit's `terminate_timeout`, and reaps it;
- a *leftover*: alive in a group srtd has already ended (SIGKILL pending): reaped;
- a *zombie*: it ended; srtd, as its reaper, reaps it (at every unit's end and at the
  teardown), so none accumulate.  A zombie whose origin was never seen alive (a setsid()
  escapee that ended before any look) stays until srtd exits, when init reaps it.

If srtd itself dies (SIGKILL), its children go to init: what the guardian ends then is
what it was told of.  So a stray seen alive while the job runs (a look comes at every
unit attempt's end) that leads its own process group is registered with the guardian
like a unit's group, and unregistered when it is reaped, before its pid can be reused.
A stray never seen alive (its unit still ran when srtd died) is beyond the guardian.

Every wait names its pid (`waitid(P_PID, ...)`): nothing here waits for "any child", so the
pidfd-based waits of `_process` and Popen's own never lose their exit statuses.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
from collections.abc import Callable
from pathlib import Path

import anyio

from srtd._structlog import get_logger
from srtd._value import value_class
from srtd.launch._process import pidfd_open
from srtd.launch._protocol import Stray

log = get_logger("srtd.launch")

# <linux/prctl.h>.  ctypes on libc's prctl: python-prctl needs libcap's headers to build,
# and the one call it would make is these few lines.
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_POLL = 0.05  # seconds between checks where pidfds are missing
_REAP_WAIT = 5.0  # seconds a SIGKILLed process gets to be gone (it is reaped later if not)
_ROUNDS = 4  # a stray's own descendants reach srtd when it ends: a few looks find them all
# Attempts per unit whose group ids are remembered: a unit restarted 100,000 times must not
# hold 100,000 entries.  A stray of an older attempt is still told by its SRTD_UNIT.
REMEMBERED_ATTEMPTS = 64
_COMMAND_CHARS = 200


def _prctl(option: int, arg: int | ctypes.c_void_p) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # not Linux, or no prctl in this libc
        return False


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    return _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.cast(ctypes.pointer(flag), ctypes.c_void_p)) and flag.value != 0


def set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop); False where the kernel does not know it."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, int(on))


@value_class(slots=True)
class ProcStat:
    """The fields of `/proc/<pid>/stat` that say where a process belongs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    comm: str

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 1 << 16)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stat(pid: int) -> ProcStat | None:
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    text = raw.decode(errors="replace")
    # `pid (comm) state ppid pgrp session ...`: comm may hold spaces and parentheses
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    try:
        return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), head.partition("(")[2])
    except (IndexError, ValueError):
        return None


def children_of(parent: int, *, thorough: bool = True) -> list[ProcStat]:
    """`parent`'s children.  Thorough: every process's stat (a few ms per hundred processes);
    else the kernel's per-thread `children` lists, far cheaper but not exact while
    children are reparented meanwhile (proc(5)), and absent without CONFIG_PROC_CHILDREN."""
    pids = None if thorough else _listed_children(parent)
    if pids is None:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    found = []
    for pid in pids:
        stat = read_stat(pid)
        if stat is not None and stat.ppid == parent:
            found.append(stat)
    return found


def _listed_children(parent: int) -> list[int] | None:
    try:
        tasks = os.listdir(f"/proc/{parent}/task")
    except OSError:
        return None
    pids: list[int] = []
    for task in tasks:
        raw = _read(f"/proc/{parent}/task/{task}/children")
        if raw is None:
            return None
        pids.extend(int(word) for word in raw.split())
    return pids


def unit_in_environment(pid: int) -> str | None:
    """`SRTD_UNIT` of the process's environment (as it was at exec), if readable."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        if entry.startswith(b"SRTD_UNIT="):
            return entry[len(b"SRTD_UNIT=") :].decode(errors="replace")
    return None


def command_line(stat: ProcStat) -> str:
    try:
        argv = Path(f"/proc/{stat.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        argv = []
    words = [w.decode(errors="replace") for w in argv if w]
    text = shlex.join(words) if words else f"[{stat.comm}]"
    return text if len(text) <= _COMMAND_CHARS else text[: _COMMAND_CHARS - 3] + "..."


def _ended(pid: int, *, reap: bool) -> bool:
    """Whether `pid` has ended; reaped too with `reap`, else left a zombie (so its pid, and
    its group id, cannot be used again meanwhile)."""
    flags = os.WEXITED | os.WNOHANG | (0 if reap else os.WNOWAIT)
    try:
        return os.waitid(os.P_PID, pid, flags) is not None
    except ChildProcessError:
        return True  # not (or no longer) ours to reap


async def _until_ended(pid: int, seconds: float, hurry: anyio.Event | None = None) -> None:
    """Until `pid` (a child of ours) has ended, for at most `seconds`, or until `hurry` is
    set.  Not reaped: the caller decides when."""
    fd = pidfd_open(pid)
    try:
        with anyio.move_on_after(seconds) as scope:
            async with anyio.create_task_group() as tg:
                if hurry is not None:
                    tg.start_soon(_cancel_when, hurry, scope)
                while not _ended(pid, reap=False):
                    if fd is not None:
                        await anyio.wait_readable(fd)
                    else:
                        await anyio.sleep(_POLL)
                tg.cancel_scope.cancel()
    finally:
        if fd is not None:
            os.close(fd)


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _send(pid: int, group: bool, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


class Strays:
    """What the local launcher knows to tell a unit's stray from srtd's other children."""

    def __init__(self) -> None:
        self.origins: dict[int, str] = {}  # session / group id -> unit: attempts' and strays'
        self.graces: dict[str, float] = {}  # unit -> its terminate_timeout
        self.ended_groups: set[int] = set()  # groups already SIGKILLed: their members are not strays
        self.seen: dict[int, str] = {}  # children of ours whose unit is known (a child's pid stays ours)
        self._own_unit = os.environ.get("SRTD_UNIT")  # srtd inside a unit: its own children carry it
        # The guardian's register (`+pgid` / `-pgid`): a stray seen alive while the job runs
        # leads a group the guardian ends if srtd dies, as it ends the units' groups.
        self.guard: tuple[Callable[[int], None], Callable[[int], None]] | None = None
        self._guarded: set[int] = set()  # leaders' pids: ours, unreaped, so the group id is too
        # unit -> its latest attempts' pids, oldest first: a list (64 B for one pid; a deque is 624)
        self._attempts: dict[str, list[int]] = {}
        self._was_subreaper: bool | None = None

    def begin(self) -> None:
        was = is_subreaper()
        if set_subreaper(True):
            self._was_subreaper = was
        else:
            log.warning("this kernel cannot make srtd a child subreaper; a unit's setsid() escapees go unseen")

    def end(self) -> None:
        if self._was_subreaper is False:
            set_subreaper(False)
        self._was_subreaper = None

    def started(self, unit: str, pid: int, grace: float) -> None:
        self.origins[pid] = unit
        self.graces[unit] = grace
        self.ended_groups.discard(pid)  # a pid used again: this group is a new one
        recent = self._attempts.setdefault(unit, [])
        recent.append(pid)
        if len(recent) > REMEMBERED_ATTEMPTS:
            old = recent.pop(0)
            # forgotten unless its pid is in use again: by a later attempt, or another unit's
            if old not in recent and self.origins.get(old) == unit:
                del self.origins[old]
                self.ended_groups.discard(old)

    def _reap(self, pid: int) -> None:
        """Reap an ended child of ours; out of the guardian's register first, while its pid
        (a group id there) cannot have been used again."""
        if pid in self._guarded and self.guard is not None:
            self._guarded.discard(pid)
            self.guard[1](pid)
        if _ended(pid, reap=True):
            self.seen.pop(pid, None)

    def _watch(self, stat: ProcStat) -> None:
        if stat.pgrp == stat.pid and stat.pid not in self._guarded and self.guard is not None:
            self._guarded.add(stat.pid)
            self.guard[0](stat.pid)

    def group_ended(self, pgid: int) -> None:
        self.ended_groups.add(pgid)

    def _origin(self, stat: ProcStat) -> str | None:
        unit = self.seen.get(stat.pid) or self.origins.get(stat.session) or self.origins.get(stat.pgrp)
        if unit is None and not stat.zombie:
            named = unit_in_environment(stat.pid)
            if named in self.graces and named != self._own_unit:
                unit = named
        if unit is not None:
            self.seen[stat.pid] = unit
        return unit

    def look(self, known: set[int], *, thorough: bool = False) -> list[tuple[ProcStat, str]]:
        """Reap the units' zombies among srtd's children; the live ones from units, with their
        unit.  At a unit's end the cheap look does (what it misses, the next one finds); the
        teardown's is thorough."""
        alive = []
        for stat in children_of(os.getpid(), thorough=thorough):
            if stat.pid in known:
                continue
            unit = self._origin(stat)
            if unit is None:
                continue
            if stat.zombie:
                self._reap(stat.pid)
            else:
                if stat.pgrp not in self.ended_groups:
                    self._watch(stat)
                alive.append((stat, unit))
        return alive

    async def end_all(self, known: Callable[[], set[int]], report: Callable[[Stray], None], hurry: anyio.Event) -> None:
        """Report, end and reap every stray; reap the leftovers of ended groups."""
        for _ in range(_ROUNDS):
            alive = self.look(known(), thorough=True)
            if not alive:
                return
            async with anyio.create_task_group() as tg:
                for stat, unit in alive:
                    if stat.pgrp in self.ended_groups:
                        tg.start_soon(self._finish, stat.pid, stat.pid, False, 0.0, hurry)
                        continue
                    stray = Stray(stat.pid, command_line(stat), unit, self.graces.get(unit, 0.0))
                    report(stray)
                    leads = stat.pgrp == stat.pid
                    for origin in (stat.pgrp, stat.session):  # its own descendants come from the same unit
                        self.origins.setdefault(origin, unit)
                    tg.start_soon(self._finish, stat.pid, stat.pgrp if leads else stat.pid, leads, stray.grace, hurry)
        log.warning("unit processes still reach srtd after the last look", rounds=_ROUNDS)

    async def _finish(self, pid: int, target: int, group: bool, grace: float, hurry: anyio.Event) -> None:
        """SIGTERM (+SIGCONT, as for a unit), SIGKILL after `grace` or once `hurry` is set;
        reaped either way.  Once a group's leader has ended, the rest of its group is
        SIGKILLed, as a unit's is when its main process ends."""
        if grace > 0 and not hurry.is_set():
            _send(target, group, signal.SIGTERM)
            _send(target, group, signal.SIGCONT)
            await _until_ended(pid, grace, hurry)
        _send(target, group, signal.SIGKILL)
        await _until_ended(pid, _REAP_WAIT)
        if group:  # the leader is at most a zombie: the group id is still this group's
            _send(target, group, signal.SIGKILL)
            self.group_ended(target)
        if _ended(pid, reap=False):
            self._reap(pid)
