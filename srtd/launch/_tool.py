"""The one way srtd runs a Slurm client tool (srun aside): `slurm_tool`, and its blocking twin.

Every sbatch, scontrol, squeue and scancel call goes through here, so each is bounded
by a timeout, never reads srtd's stdin, and is reported the same way: an exit status
(None when the tool could not run or timed out), its stdout, and what it said.
The launcher calls it from its event loop; the CLI (`srtd submit`, `srtd ps`) from
plain code, through `run_slurm_tool`.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

TOOL_TIMEOUT = 30.0


@dataclass(frozen=True)
class ToolRun:
    """What one Slurm command did."""

    argv: tuple[str, ...]
    code: int | None  # None: it could not be run, or timed out
    out: str
    err: str
    missing: bool = False  # the tool is not installed

    @property
    def ok(self) -> bool:
        return self.code == 0

    def said(self) -> str:
        """Its last line of complaint (stderr, else stdout), or how it ended."""
        lines = [line for line in (self.err or self.out).strip().splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
        return "no answer" if self.code is None else f"exit status {self.code}"


async def slurm_tool(argv: Sequence[str], timeout: float = TOOL_TIMEOUT, input: bytes | None = None) -> ToolRun:
    """Run a Slurm command to its end (at most `timeout` s); `input` is its stdin, else nothing."""
    words = tuple(argv)
    with anyio.move_on_after(timeout):
        try:
            if input is None:
                done = await anyio.run_process(list(words), check=False, stdin=subprocess.DEVNULL)
            else:
                done = await anyio.run_process(list(words), check=False, input=input)
        except FileNotFoundError:
            return ToolRun(words, None, "", f"{words[0]} not found", missing=True)
        except OSError as e:
            return ToolRun(words, None, "", f"{words[0]}: {e.strerror or e}")
        out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
        return ToolRun(words, done.returncode, out, err)
    return ToolRun(words, None, "", f"{words[0]} timed out after {timeout:g} s")


def run_slurm_tool(argv: Sequence[str], timeout: float = TOOL_TIMEOUT, input: bytes | None = None) -> ToolRun:
    """`slurm_tool` from code that is not in an event loop (the CLI)."""
    return anyio.run(functools.partial(slurm_tool, argv, timeout, input))
