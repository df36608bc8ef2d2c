"""Launchers: how a `Unit` becomes a process.

The supervisor sees only `Launcher` and `Handle` (see `_protocol`).  `LocalLauncher`
runs units as child process groups of this machine; `FakeLauncher` plays scripted
attempts for tests of the supervisor's logic.
"""

from srtd.launch._fake import FakeHandle, FakeLauncher, FakeRun, FakeSignal, FakeStart
from srtd.launch._local import LOCAL_ADDRESS, LocalHandle, LocalLauncher, unit_argv, unit_env
from srtd.launch._protocol import ExitStatus, Handle, Launcher, signal_name

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
    "signal_name",
    "unit_argv",
    "unit_env",
]
