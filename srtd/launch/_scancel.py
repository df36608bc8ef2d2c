"""Step signals through scancel: batched, and retried while slurmctld does not answer.

scancel can block for MessageTimeout (a node of the job not answering makes slurmctld
wait for it; a silent slurmctld makes `Controller.call` retry), and the step ending, seen
as srun's exit, is the truth anyway: so a stop never waits for the scancel behind it.
The signals sent within `BATCH_WINDOW` go out in one scancel per signal (a tier of 400
steps is one scancel, not 400 processes and 400 RPCs: perf/_slurm.py).
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Protocol

import anyio
import anyio.abc

from srtd.launch._controller import Controller
from srtd.launch._protocol import signal_name

BATCH_WINDOW = 0.005  # seconds the signals to steps gather before one scancel sends them
BATCH_MAX = 256  # step ids per scancel


class Ending(Protocol):
    def ended(self) -> bool: ...


class Scancels:
    """The launcher's scancel calls: `now` for one call, `send` for the batched background."""

    def __init__(self, scancel: str, controller: Controller) -> None:
        self.scancel = scancel
        self.controller = controller
        self._outbox: dict[int, list[tuple[str, Ending | None]]] = {}  # signal -> the next scancel's steps

    async def now(self, steps: Sequence[str], sig: int, handles: Sequence[Ending | None] = ()) -> None:
        """Signal `steps`; while slurmctld does not answer, again with backoff until they have ended.

        The exit status is not the truth (22.05 exits 225 after delivering, and 0 when the
        controller never answered); scancel's output and the steps ending are.
        """
        argv = [self.scancel, f"--signal={signal_name(sig).removeprefix('SIG')}"]
        if sig != signal.SIGKILL:
            argv.append("--full")

        def moot() -> bool:  # every step it signals has ended (known only through their handles)
            return bool(handles) and all(h is not None and h.ended() for h in handles)

        await self.controller.call([*argv, *steps], done=moot)

    def send(self, tg: anyio.abc.TaskGroup, step: str, sig: int, handle: Ending | None = None) -> None:
        """Signal `step` in the background (in `tg`), with the others sent in the same few ms."""
        batch = self._outbox.setdefault(sig, [])
        batch.append((step, handle))
        if len(batch) == 1:
            tg.start_soon(self._send_batch, sig)

    async def _send_batch(self, sig: int) -> None:
        await anyio.sleep(BATCH_WINDOW)  # the rest of a tier is signalled in these few ms
        batch = self._outbox.pop(sig, [])
        async with anyio.create_task_group() as tg:
            for i in range(0, len(batch), BATCH_MAX):
                part = batch[i : i + BATCH_MAX]
                tg.start_soon(self.now, [step for step, _ in part], sig, [h for _, h in part])
