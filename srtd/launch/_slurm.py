"""`SlurmLauncher`: every unit is a named step of the job srtd runs in.

- `start` runs the unit's srun line (`_srun.srun_argv`) as a child of srtd in its own
  session and returns at once; the handle's `settle` then waits until the step's wrapper
  has recorded `<job>.<step>` in the step file (or srun has exited): so the step id is
  known without racing `squeue`, and a step srun refused (unknown option, node outside
  the allocation) is a `LaunchError` carrying srun's own message.  The supervisor awaits
  `settle` unshielded, so a teardown never waits for a step Slurm is slow to create.
  srun's chatter goes to `<step>.srun` beside the step file, never into the unit's log,
  and is only ever shown, never parsed.
- The srun client's exit is the attempt's exit; srun mirrors the task's code (7, or
  128 + N for a task killed by signal N, which is reported as that signal).
- `signal` is `scancel --signal=<SIG> --full <job>.<step>`; `kill` is `scancel
  --signal=KILL <job>.<step>`, each sent in the background (`send`), the steps signalled
  within 5 ms in one scancel (a tier of hundreds of steps is one call): a scancel blocks
  MessageTimeout while any node of the job does not answer.  scancel's exit status is ignored (22.05 exits 225 after
  delivering): the step ending, seen as srun's exit, is the truth.  Before the step id
  is known the signal goes to the srun client (which forwards it).  A stop sent before
  the step's task began is sent again once the task records its id: Slurm drops a
  signal to a step whose task is not launched yet, and srun, signalled meanwhile, still
  launches it, which would run until the stop's SIGKILL.
- An srun client that died is not proof that its step did: when the client was killed
  by a signal, `wait` kills its step and returns only once Slurm no longer lists it
  (so a restart never runs beside the old task).  No step outlives srtd: on leaving
  the launcher every step it started that Slurm still lists (`squeue --steps`) is
  killed with scancel and waited for.  Both leave the steps to Slurm while Slurm is
  ending the job itself (scancel, time limit), so srtd finishes inside KillWait.
- A node that stops answering (`_presence.py`: its slurmd refuses or ignores connects
  for `node_lost_after` s) is lost: each attempt there ends at once as
  `ExitStatus.unreachable("node nodeK lost (...)")` (its srun client, which would wait
  for SlurmdTimeout, is killed), it is never signalled again (a scancel aimed at it
  blocks MessageTimeout), a start that needs the node is refused with that reason, and
  on leaving its step is left to Slurm with one line instead of being waited for.
- Addresses come from the caller (`scontrol show node` NodeAddr, looked up once per job
  by `slurm_addresses`).
"""

from __future__ import annotations

import os
import signal as _signal
import subprocess
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import anyio
import anyio.abc

from srtd._files import open_file, open_under
from srtd._structlog import get_logger
from srtd.errors import FileRefused, LaunchError
from srtd.launch._controller import Controller, list_steps, parse_duration
from srtd.launch._nodes import parse_nodes, show_nodes, slurm_addresses, slurmd_targets
from srtd.launch._presence import NodePresence
from srtd.launch._protocol import StopCause, Stray
from srtd.launch._scancel import Scancels
from srtd.launch._slurm_step import STEP_ID_WAIT, SlurmHandle
from srtd.launch._srun import STEP_DIR, srun_argv, step_file, step_name, unit_environment
from srtd.launch._tool import ToolRun, slurm_tool
from srtd.unit import Unit

log = get_logger("srtd.launch")

_SWEEP_WAIT = 15.0  # seconds the exit sweep waits for killed steps to leave squeue


class SlurmLauncher:
    """Launch units as steps of job `job_id` (srtd runs inside it).  See the module docstring."""

    # Steps on other nodes write their --output files through a shared file system, whose
    # writes from other nodes raise no inotify event here: the job's log watcher polls.
    log_watch: str | None = "poll"  # lines are written on the nodes: no inotify events here

    def __init__(
        self,
        *,
        job_id: str,
        log_dir: Path | str,
        addresses: Mapping[str, str] | None = None,
        srun: str = "srun",
        scancel: str = "scancel",
        squeue: str = "squeue",
        step_id_wait: float = STEP_ID_WAIT,
        early_warning: int = 0,
        slurmd: Mapping[str, tuple[str, int]] | None = None,
        node_check_interval: float = 0.0,
        node_lost_after: float = 10.0,
    ) -> None:
        self.job_id = job_id
        self.log_dir = Path(log_dir)
        self.addresses = dict(addresses or {})
        self.srun = srun
        self.scancel_bin = scancel
        self.squeue = squeue
        self.step_id_wait = step_id_wait
        self.early_warning = early_warning
        self.handles: list[SlurmHandle] = []
        # node -> its slurmd's (address, port): checked for presence while the job runs
        self.presence = NodePresence(
            slurmd or {}, interval=node_check_interval, lost_after=node_lost_after, on_lost=self.node_lost
        )
        self.controller = Controller()
        self.scancels = Scancels(scancel, self.controller)
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Self:
        try:
            (self.log_dir / STEP_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LaunchError(f"cannot create {self.log_dir / STEP_DIR}: {e.strerror}") from e
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.presence.run)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await self.sweep()
        finally:
            # The presence check's task group was entered in __aenter__: left here, outside the shield.
            if self._tg is not None:
                tg, self._tg = self._tg, None
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)

    def node_lost(self, node: str, evidence: str) -> None:
        """The presence check gave `node` up: every attempt there ends with the reason."""
        reason = f"node {node} lost ({evidence})"
        log.error("a node of the job is lost", node=node, evidence=evidence)
        for handle in self.handles:
            if node in handle.unit.nodes and handle.poll() is None:
                handle.give_up(reason, node)

    def hurry(self, nodes: Sequence[str]) -> None:
        """Decide soon whether `nodes` are lost (`NodePresence.hurry`), in the background."""
        if self._tg is not None:
            for node in nodes:
                self._tg.start_soon(self.presence.hurry, node)

    def in_background(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `task` beside the job, until it returns or the launcher is left."""
        if self._tg is not None:
            self._tg.start_soon(task)

    def _refuse_lost(self, unit: Unit) -> None:
        for node in unit.nodes:
            evidence = self.presence.lost.get(node)
            if evidence is not None:
                raise LaunchError(f"{unit.name}: node {node} lost ({evidence})")

    def address(self, node: str) -> str:
        return self.addresses.get(node, node)

    async def end_strays(self, report: Callable[[Stray], None], hurry: anyio.Event | None = None) -> None:
        """Nothing srtd can do here: a step's processes are on its nodes, under slurmstepd, never
        srtd's descendants.  Slurm ends them with the step: with `proctrack/cgroup` every one,
        setsid() or not; other proctrack plugins can miss a process that daemonized away
        (docs/slurm.md)."""

    async def explain(self, signum: int) -> StopCause | None:
        """Why srtd (the batch shell) got a stop signal, for the journal."""
        if signum == _signal.SIGUSR1:
            # within the supervisor's EXPLAIN_WAIT (5 s): a busy slurmctld that answers late is
            # still told apart from one that did not answer (a graceful stop, said as such)
            done = await slurm_tool([self.squeue, "--noheader", f"--jobs={self.job_id}", "--format=%L"], 4.0)
            left = parse_duration(done.out.strip()) if done.ok else None
            # Slurm may send the early warning up to 60 s before it is due.
            if left is not None and left <= self.early_warning + 60:
                return StopCause(
                    f"received SIGUSR1 {left} s before the time limit: Slurm's early warning "
                    f"(--signal=B:USR1@{self.early_warning})",
                    time_limit=True,
                )
            return StopCause("received SIGUSR1: a graceful stop request (e.g. scancel --batch --signal=USR1)")
        if signum == _signal.SIGTERM:
            return StopCause(
                "received SIGTERM: Slurm is ending the job (scancel or the time limit) and signals every step too"
            )
        return None

    async def run_check(self, node: str, argv: Sequence[str], *, timeout: float) -> ToolRun:
        """One step on `node` alone, outside any container; its output is the verdict."""
        step = [self.srun, f"--jobid={self.job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}"]
        return await slurm_tool([*step, "--job-name=srtd_preflight", "--quiet", *argv], timeout)

    def argv(self, unit: Unit, attempt: int, log_path: Path) -> list[str]:
        record = step_file(self.log_dir, step_name(unit.name, attempt)) if unit.srun.shell else None
        return srun_argv(unit, job_id=self.job_id, attempt=attempt, log_path=log_path, record=record, srun=self.srun)

    async def scancel(self, steps: str | Sequence[str], sig: int) -> None:
        """Signal `steps` now (retried while slurmctld does not answer); see `Scancels`."""
        await self.scancels.now([steps] if isinstance(steps, str) else steps, sig)

    def send(self, step: str, sig: int, handle: SlurmHandle | None = None) -> None:
        """scancel in the background, batched with the signals sent in the same few ms."""
        if self._tg is None:
            raise RuntimeError("SlurmLauncher used outside `async with`")
        self.scancels.send(self._tg, step, sig, handle)

    async def start(self, unit: Unit, *, attempt: int, log_path: Path) -> SlurmHandle:
        self._refuse_lost(unit)
        step = step_name(unit.name, attempt)
        argv = self.argv(unit, attempt, log_path)
        env = dict(os.environ)
        if not unit.srun.shell:
            # No wrapper to export the unit's env: it rides on srun's environment
            # (the plan shows it as an `env K=V srun ...` prefix).
            env.update(unit_environment(unit, attempt))
            for name in unit.unset_env:
                env.pop(name, None)
        record = step_file(self.log_dir, step)
        messages = self.log_dir / STEP_DIR / f"{step}.srun"

        def spawn() -> subprocess.Popen[bytes]:
            fd = open_under(self.log_dir, messages, error=FileRefused)  # no link, no FIFO, below the log dir
            with open(fd, "wb") as out:  # srun's chatter of this run only: it is judged
                return subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # a Ctrl-C on srtd's terminal is srtd's to handle
                    close_fds=True,
                )

        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            os.close(open_file(log_path, error=FileRefused))
            record.parent.mkdir(parents=True, exist_ok=True)
            record.unlink(missing_ok=True)
            handle = SlurmHandle(self, unit, step, spawn)
        except OSError as e:
            raise LaunchError(f"{unit.name}: cannot start srun: {e}") from e
        self.handles.append(handle)
        return handle

    async def job_state(self) -> str | None:
        """The job's state as squeue says (RUNNING, COMPLETING, ...); None if squeue does not answer."""
        done = await slurm_tool([self.squeue, "--noheader", f"--jobs={self.job_id}", "--format=%T"], 5.0)
        return done.out.strip() or None if done.ok else None

    async def end_orphan(self, handle: SlurmHandle) -> None:
        """The srun client died: kill its step and wait (bounded) until Slurm no longer lists it."""
        step = await handle.find_step()
        if step is None:
            return
        state = await self.job_state()
        if state is not None and state != "RUNNING":
            return  # Slurm is ending the job and every step with it (see `sweep`)
        log.warning("an srun client died; killing its step", step=handle.step, step_id=step)
        with anyio.move_on_after(_SWEEP_WAIT):
            while True:
                await self.scancel(step, _signal.SIGKILL)
                steps = await list_steps(self.job_id, self.squeue)
                if steps is None or step not in steps:
                    return
                await anyio.sleep(0.3)

    async def sweep(self) -> None:
        """Kill every step this launcher started that Slurm still lists, and wait until it is gone.

        Not while Slurm itself is ending the job (scancel, time limit): it is stopping
        every step then, and refuses step signals; srtd must finish inside KillWait.
        """
        state = await self.job_state()
        if state is not None and state != "RUNNING":
            log.info("Slurm is ending the job; it stops the remaining steps itself", state=state)
            return
        abandoned = self.leave_lost()
        live = [h for h in self.handles if h.poll() is None]
        async with anyio.create_task_group() as tg:
            for handle in live:
                log.warning("stopping a leftover step", step=handle.step)
                tg.start_soon(handle.kill)
        with anyio.move_on_after(3.0):
            for handle in live:
                await handle.wait()
        for handle in live:
            if handle.poll() is None:
                handle.kill_client()
                with anyio.move_on_after(2.0):
                    await handle.wait()
        ours = {h.step for h in self.handles} - abandoned
        if not ours:
            return
        with anyio.move_on_after(_SWEEP_WAIT):
            while True:
                steps = await list_steps(self.job_id, self.squeue, self.controller)
                if steps is None:
                    return  # no squeue answer (the job itself has gone): nothing to sweep
                left = {sid: name for sid, name in steps.items() if name in ours}
                if not left:
                    return
                for sid, name in left.items():
                    log.warning("killing a step that outlived its srun client", step=name, step_id=sid)
                # One scancel for all of them: each call may cost MessageTimeout.
                await self.scancel(list(left), _signal.SIGKILL)
                await anyio.sleep(0.5)

    def leave_lost(self) -> set[str]:
        """The step names of attempts on lost nodes, each said once: Slurm ends them with the job."""
        names: set[str] = set()
        for handle in self.handles:
            if handle.lost is None:
                continue
            names.add(handle.step)
            nodes = ", ".join(n for n in handle.unit.nodes if n in self.presence.lost)
            step = handle.step_id or handle.step
            log.warning(f"left to Slurm: step {step} on lost node {nodes}")
        return names


__all__ = [
    "SlurmHandle",
    "SlurmLauncher",
    "list_steps",
    "parse_duration",
    "parse_nodes",
    "show_nodes",
    "slurm_addresses",
    "slurmd_targets",
]
