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

import anyio

from srtd._value import value_class

TOOL_TIMEOUT = 30.0

# Slurm's own texts (slurm_strerror) for "the message never got an answer".
COMMUNICATION_ERRORS = (
    "Socket timed out on send/recv operation",
    "Unable to contact slurm controller",
    "Communication connection failure",
    "Communication send failure",
    "Communication receive failure",
    "Zero Bytes were transmitted or received",
    "Slurm backup controller in standby mode",
)
# scancel's words when slurmctld answered but a node of the job did not (a lost node):
# the signal reached the healthy nodes, and the controller is not the one silent.
NODE_ERRORS = ("Kill job error on job step id",)


def communication_error(text: str) -> str | None:
    """The first line of `text` that carries one of Slurm's communication errors with slurmctld."""
    for line in text.splitlines():
        if any(error in line for error in COMMUNICATION_ERRORS) and not any(n in line for n in NODE_ERRORS):
            return line.strip()
    return None


@value_class
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

    @property
    def unreached(self) -> str | None:
        """Why this call did not reach slurmctld, if it did not (Slurm's own words, or the timeout)."""
        said = communication_error(self.out + "\n" + self.err)
        if said is None and self.code is None and not self.missing and " timed out after " in self.err:
            return self.err
        return said

    def said(self) -> str:
        """Its last line of complaint (stderr, else stdout), or how it ended."""
        lines = [line for line in (self.err or self.out).strip().splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
        return "no answer" if self.code is None else f"exit status {self.code}"


def refused_run(words: tuple[str, ...], err: OSError) -> ToolRun:
    """A command that could not be started: missing, or refused by the system."""
    if isinstance(err, FileNotFoundError):
        return ToolRun(words, None, "", f"{words[0]} not found", missing=True)
    return ToolRun(words, None, "", f"{words[0]}: {err.strerror or err}")


def timed_out_run(words: tuple[str, ...], timeout: float) -> ToolRun:
    return ToolRun(words, None, "", f"{words[0]} timed out after {timeout:g} s")


async def slurm_tool(argv: Sequence[str], timeout: float = TOOL_TIMEOUT, input: bytes | None = None) -> ToolRun:
    """Run a Slurm command to its end (at most `timeout` s); `input` is its stdin, else nothing."""
    words = tuple(argv)
    with anyio.move_on_after(timeout):
        try:
            if input is None:
                done = await anyio.run_process(list(words), check=False, stdin=subprocess.DEVNULL)
            else:
                done = await anyio.run_process(list(words), check=False, input=input)
        except OSError as e:
            return refused_run(words, e)
        out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
        return ToolRun(words, done.returncode, out, err)
    return timed_out_run(words, timeout)


def run_slurm_tool(argv: Sequence[str], timeout: float = TOOL_TIMEOUT, input: bytes | None = None) -> ToolRun:
    """`slurm_tool` from code that is not in an event loop (the CLI)."""
    return anyio.run(functools.partial(slurm_tool, argv, timeout, input))
