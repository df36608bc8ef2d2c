"""Launchers: how a `Unit` becomes a process.

The supervisor sees only `Launcher` and `Handle` (see `_protocol`).  `LocalLauncher`
runs units as child process groups of this machine; `SlurmLauncher` runs each
as a named step of the Slurm job srtd runs in (`_srun` renders its srun line); `FakeLauncher` plays scripted
attempts for tests of the supervisor's logic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srtd._lazy import lazy_attributes

if TYPE_CHECKING:
    from srtd.launch._early import EarlyCheck
    from srtd.launch._fake import FakeHandle, FakeLauncher, FakeRun, FakeSignal, FakeStart
    from srtd.launch._local import LOCAL_ADDRESS, LocalHandle, LocalLauncher, unit_argv, unit_env
    from srtd.launch._portblock import PORT_OFFSET_STEP, PortClaim, claim_port_block
    from srtd.launch._protocol import ExitStatus, Handle, Launcher, StopCause, Stray, signal_name
    from srtd.launch._queue import (
        ENDED_STATES,
        SlurmJob,
        cancel_job,
        find_job,
        mark_comment,
        read_mark,
        release_job,
        show_job,
        slurm_exit_code,
        submit_held,
        user_jobs,
        wait_ended,
    )
    from srtd.launch._slurm import SlurmHandle, SlurmLauncher, list_steps, slurm_addresses, slurmd_targets
    from srtd.launch._srun import srun_argv, srun_line, srun_nodelist, step_name, with_srun_lines, wrapper_script
    from srtd.launch._tool import ToolRun, run_slurm_tool, slurm_tool

# Every module loads on first use: `srtd plan` renders srun lines and needs none of the
# launchers (nor structlog and anyio, which they import); `srtd ps` reads Slurm's queue
# and needs not even the plan's models.
_LAZY = {
    **dict.fromkeys(("ExitStatus", "Handle", "Launcher", "StopCause", "Stray", "signal_name"), "_protocol"),
    **dict.fromkeys(
        ("srun_argv", "srun_line", "srun_nodelist", "step_name", "with_srun_lines", "wrapper_script"), "_srun"
    ),
    **dict.fromkeys(("FakeHandle", "FakeLauncher", "FakeRun", "FakeSignal", "FakeStart"), "_fake"),
    **dict.fromkeys(("LOCAL_ADDRESS", "LocalHandle", "LocalLauncher", "unit_argv", "unit_env"), "_local"),
    **dict.fromkeys(("PORT_OFFSET_STEP", "PortClaim", "claim_port_block"), "_portblock"),
    **dict.fromkeys(("SlurmHandle", "SlurmLauncher", "list_steps", "slurm_addresses", "slurmd_targets"), "_slurm"),
    # Slurm's queue from the outside (srtd submit, ps) and the one helper every Slurm tool runs through
    **dict.fromkeys(
        (
            "ENDED_STATES",
            "SlurmJob",
            "cancel_job",
            "find_job",
            "mark_comment",
            "read_mark",
            "release_job",
            "show_job",
            "slurm_exit_code",
            "submit_held",
            "user_jobs",
            "wait_ended",
        ),
        "_queue",
    ),
    **dict.fromkeys(("ToolRun", "run_slurm_tool", "slurm_tool"), "_tool"),
    "EarlyCheck": "_early",  # light: started before the launchers load (srtd/cli/_supervise.py)
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "ENDED_STATES",
    "LOCAL_ADDRESS",
    "PORT_OFFSET_STEP",
    "EarlyCheck",
    "ExitStatus",
    "FakeHandle",
    "FakeLauncher",
    "FakeRun",
    "FakeSignal",
    "FakeStart",
    "Handle",
    "Launcher",
    "LocalHandle",
    "LocalLauncher",
    "PortClaim",
    "SlurmHandle",
    "SlurmJob",
    "SlurmLauncher",
    "StopCause",
    "Stray",
    "ToolRun",
    "cancel_job",
    "claim_port_block",
    "find_job",
    "list_steps",
    "mark_comment",
    "read_mark",
    "release_job",
    "run_slurm_tool",
    "show_job",
    "signal_name",
    "slurm_addresses",
    "slurm_exit_code",
    "slurm_tool",
    "slurmd_targets",
    "srun_argv",
    "srun_line",
    "srun_nodelist",
    "step_name",
    "submit_held",
    "unit_argv",
    "unit_env",
    "user_jobs",
    "wait_ended",
    "with_srun_lines",
    "wrapper_script",
]
