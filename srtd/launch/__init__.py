"""Launchers: how a `Unit` becomes a process.

The supervisor sees only `Launcher` and `Handle` (see `_protocol`).  `LocalLauncher`
runs units as child process groups of this machine; `SlurmLauncher` runs each
as a named step of the Slurm job srtd runs in (`_srun` renders its srun line); `FakeLauncher` plays scripted
attempts for tests of the supervisor's logic.
"""

from srtd.launch._fake import FakeHandle, FakeLauncher, FakeRun, FakeSignal, FakeStart
from srtd.launch._local import LOCAL_ADDRESS, LocalHandle, LocalLauncher, unit_argv, unit_env
from srtd.launch._protocol import ExitStatus, Handle, Launcher, signal_name
from srtd.launch._slurm import SlurmHandle, SlurmLauncher, list_steps, slurm_addresses
from srtd.launch._srun import srun_argv, srun_line, srun_nodelist, step_name, with_srun_lines, wrapper_script

__all__ = [
    "LOCAL_ADDRESS",
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
    "SlurmHandle",
    "SlurmLauncher",
    "list_steps",
    "signal_name",
    "slurm_addresses",
    "srun_argv",
    "srun_line",
    "srun_nodelist",
    "step_name",
    "unit_argv",
    "unit_env",
    "with_srun_lines",
    "wrapper_script",
]
