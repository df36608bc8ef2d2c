"""`LocalLauncher`: every node is this machine; each unit is a child process group.

- A unit runs in its own session (`start_new_session=True`), so its pid is its
  process group id and `signal()` reaches everything it spawned.
- stdout and stderr go to the unit's log file, created fresh for every attempt.
- env = srtd's environment as the job starts (read once) + `unit.env` - `unit.unset_env`,
  plus `SRTD_UNIT` and `SRTD_ATTEMPT`; `cwd` as given.
- argv is never shell-interpreted.  A `preamble` runs as
  `bash -c '<preamble>\\nexec "$@"' srtd-unit <argv...>`: argv travels as positional
  parameters and the unit's program replaces the shell (so it gets SIGTERM itself).
- Containers are not supported locally: the spec is ignored with one warning per job.
- No orphans: a guardian process kills the registered groups when srtd dies, and
  (where `setpriv` supports it) each unit also carries `PR_SET_PDEATHSIG=SIGKILL`.
- When a unit's main process exits, whatever it left in its process group is
  SIGKILLed (Slurm does the same when a step ends).
- What a unit leaves outside its process group (a setsid() daemon) is not lost: srtd is a
  child subreaper while the launcher runs, and `end_strays` reports, ends and reaps such
  strays after the teardown (`_strays`).
- SIGTERM is followed by SIGCONT, as Slurm's own job termination does: a stopped (frozen)
  process that handles SIGTERM keeps it pending until it runs again, so without
  SIGCONT it would only end at the SIGKILL deadline.
- Before a unit's first attempt, each port it will listen on (`unit.ports`) must be
  free on this machine: a program already listening there would answer the unit's
  readiness probe, and the job would go on against the wrong server.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import anyio

from srtd._files import open_file
from srtd._structlog import get_logger
from srtd.errors import FileRefused, LaunchError
from srtd.launch._guardian import Guardian
from srtd.launch._holders import bind_errno, port_holder
from srtd.launch._process import ChildProcess
from srtd.launch._protocol import ExitStatus, Stray
from srtd.launch._strays import Strays
from srtd.launch._tool import ToolRun, slurm_tool
from srtd.unit import Unit

if TYPE_CHECKING:
    from srtd.launch._early import EarlyCheck

log = get_logger("srtd.launch")

LOCAL_ADDRESS = "127.0.0.1"
_SHUTDOWN_REAP = 2.0
_SETPRIV_LIMIT = 4 << 20  # util-linux's setpriv is about 80 KiB


def _setpriv_pdeathsig() -> list[str] | None:
    """`setpriv --pdeathsig KILL --` if this machine's setpriv knows the option.

    Known from the binary itself: its long-option table holds `pdeathsig` as a string of its
    own.  Asking `setpriv --help` was a process of 5 ms before any unit could start."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            known = b"\0pdeathsig\0" in f.read(_SETPRIV_LIMIT)
    except OSError:
        return None
    return [path, "--pdeathsig", "KILL", "--"] if known else None


def _find_program(program: str, env: Mapping[str, str], cwd: str | None) -> str | None:
    if "/" in program:
        path = Path(cwd or ".") / program
        return str(path) if os.access(path, os.X_OK) and path.is_file() else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def unit_argv(unit: Unit) -> list[str]:
    """The argv that runs `unit` locally, preamble included (no other shell)."""
    if unit.preamble:
        return ["bash", "-c", unit.preamble + '\nexec "$@"', "srtd-unit", *unit.argv]
    return list(unit.argv)


def unit_env(unit: Unit, attempt: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(unit.env)
    for name in unit.unset_env:
        env.pop(name, None)
    env["SRTD_UNIT"] = unit.name
    env["SRTD_ATTEMPT"] = str(attempt)
    return env


class LocalHandle:
    """One local attempt: a process group led by `pid`."""

    __slots__ = ("_child", "_launcher", "name")

    def __init__(self, name: str, popen: subprocess.Popen[bytes], launcher: LocalLauncher) -> None:
        self.name = name
        self._launcher = launcher
        self._child = ChildProcess(popen, before_reap=self._kill_leftovers)

    @property
    def pid(self) -> int | None:
        return self._child.pid

    def _kill_leftovers(self) -> None:
        # The leader is a zombie, so the group id is still ours: kill what it left.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._child.pid, signal.SIGKILL)
        self._launcher.strays.group_ended(self._child.pid)

    def _ended(self) -> None:
        self._launcher._ended(self)

    @property
    def step_id(self) -> str | None:
        return None

    def poll(self) -> ExitStatus | None:
        status = self._child.poll()
        if status is not None:
            self._ended()
        return status

    async def settle(self) -> None:
        return  # exec either happened in start() or raised there

    async def wait(self) -> ExitStatus:
        status = await self._child.wait()
        self._ended()
        return status

    async def signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._child.pid, sig)
            if sig == signal.SIGTERM:
                # Wake a stopped group so it can act on the SIGTERM now pending.
                os.killpg(self._child.pid, signal.SIGCONT)

    async def kill(self) -> None:
        await self.signal(signal.SIGKILL)


def _check_ports_free(unit: Unit) -> None:
    """LaunchError when another program already holds one of the unit's ports.

    Only the first attempt is checked: a restart's port may still be held for a moment by
    what the previous attempt left behind, and the unit's own bind then says so.
    """
    for name, port in unit.ports.items():
        refused = bind_errno(port) if port > 0 else None
        if refused == errno.EACCES:
            raise LaunchError(f"{unit.name}: port {port} ({name}) needs privileges to bind")
        if refused is not None:
            raise LaunchError(
                f"{unit.name}: port {port} ({name}) is already in use on this machine; "
                f"{port_holder(port)} listens there and would answer the unit's readiness probe"
            )


class LocalLauncher:
    """Run every unit on this machine.  See the module docstring for the contract."""

    log_watch: str | None = None  # logs are on this machine: inotify where it works

    def __init__(
        self,
        *,
        guardian: bool = True,
        pdeathsig: bool = True,
        guardian_grace: float = 5.0,
        env: Mapping[str, str] | None = None,
        early_checks: Sequence[EarlyCheck] = (),
    ) -> None:
        self._use_guardian = guardian
        # checks started before the supervisor was imported (srtd/launch/_early.py): `run_check`
        # takes one's result for its argv; those never asked for end with the launcher
        self._early = list(early_checks)
        self._use_pdeathsig = pdeathsig
        self._guardian = Guardian(guardian_grace) if guardian else None
        self._base_env = env
        self._prefix: list[str] = []
        self._live: dict[int, LocalHandle] = {}
        # (program, PATH, cwd) found once: a thousand units of one program search PATH once
        self._found: set[tuple[str, str | None, str | None]] = set()
        self._warned_container = False
        self.strays = Strays()
        if self._guardian is not None:
            self.strays.guard = (self._guardian.add, self._guardian.remove)

    @property
    def guardian_pid(self) -> int | None:
        return self._guardian.pid if self._guardian is not None else None

    async def __aenter__(self) -> Self:
        if self._base_env is None:
            # os.environ as the job starts, read once: copying it decodes every name and value,
            # 0.1 ms a launch (a tenth of a second for 1000 units)
            self._base_env = dict(os.environ)
        if self._use_pdeathsig:
            self._prefix = _setpriv_pdeathsig() or []
        if self._guardian is not None:
            try:
                self._guardian.spawn()
            except OSError as e:
                raise LaunchError(f"cannot start the local guardian process: {e}") from e
        # Before any unit starts (an orphan of a unit then comes to srtd, never to init), and
        # after what can fail here: a refused __aenter__ has no __aexit__ to set it back.
        self.strays.begin()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        # The supervisor has stopped every unit; anything still alive is a leftover.
        with anyio.CancelScope(shield=True):
            leftovers = list(self._live.values())
            for handle in leftovers:
                log.warning("killing leftover unit", unit=handle.name, pid=handle.pid)
                await handle.kill()
            with anyio.move_on_after(_SHUTDOWN_REAP):
                for handle in leftovers:
                    await handle.wait()
            # A job that ended normally has ended its strays already; this one may not have been.
            await self.end_strays(lambda stray: log.warning("ending a stray process", stray=stray.describe()))
            self.strays.end()
            for check in self._early:
                check.discard()
            self._early.clear()
            if self._guardian is not None:
                proc = self._guardian.close()
                if proc is not None:
                    child = ChildProcess(proc)
                    with anyio.move_on_after(_SHUTDOWN_REAP):
                        await child.wait()
                    if child.poll() is None:
                        proc.kill()
                        await child.wait()

    def address(self, node: str) -> str:
        return LOCAL_ADDRESS

    def _own_children(self) -> set[int]:
        """srtd's children that are not strays: the live units' leaders and the guardian."""
        known = set(self._live)
        if self._guardian is not None and self._guardian.pid is not None:
            known.add(self._guardian.pid)
        known.update(check.pid for check in self._early if check.pid is not None)
        return known

    async def run_check(self, node: str, argv: Sequence[str], *, timeout: float) -> ToolRun:
        """Every node is this machine: the check runs here (or ran already: an early check)."""
        early = next((check for check in self._early if check.argv == tuple(argv)), None)
        if early is None:
            return await slurm_tool(argv, timeout)
        try:
            return await early.result(timeout)
        finally:
            self._early.remove(early)

    async def end_strays(self, report: Callable[[Stray], None], hurry: anyio.Event | None = None) -> None:
        with anyio.CancelScope(shield=True):
            await self.strays.end_all(self._own_children, report, hurry or anyio.Event())

    async def start(self, unit: Unit, *, attempt: int, log_path: Path) -> LocalHandle:
        if unit.container is not None and not self._warned_container:
            self._warned_container = True
            log.warning(
                "container specs are ignored by the local launcher; units run on the host",
                first_unit=unit.name,
                image=unit.container.image,
            )
        if not unit.argv:
            raise LaunchError(f"{unit.name}: empty argv")
        env = unit_env(unit, attempt, self._base_env)
        program = unit.argv[0]
        if unit.preamble is None:
            # Checked here: behind setpriv or bash it would only show as exit code 127.
            self._check_program(unit, program, env)
        if attempt == 0:
            _check_ports_free(unit)
        argv = self._prefix + unit_argv(unit)
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(open_file(log_path, error=FileRefused), "wb") as out:  # a link or FIFO there: refused
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=unit.cwd,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as e:
            raise LaunchError(f"{unit.name}: cannot start {program!r}: {e}") from e
        handle = LocalHandle(unit.name, popen, self)
        self._live[popen.pid] = handle
        self.strays.started(unit.name, popen.pid, unit.terminate_timeout)
        if self._guardian is not None:
            self._guardian.add(popen.pid)
        return handle

    def _check_program(self, unit: Unit, program: str, env: Mapping[str, str]) -> None:
        key = (program, env.get("PATH"), unit.cwd)
        if key in self._found:
            return
        if _find_program(program, env, unit.cwd) is None:
            raise LaunchError(f"{unit.name}: cannot start {program!r}: no such executable")
        self._found.add(key)

    def _ended(self, handle: LocalHandle) -> None:
        pid = handle.pid
        if pid is not None and self._live.pop(pid, None) is not None:
            if self._guardian is not None:
                self._guardian.remove(pid)
            # What the unit's group left is SIGKILLed and, reparented to srtd, reaped here or
            # at the next look; nothing is reported yet: a live stray may still be working.
            self.strays.look(self._own_children())
