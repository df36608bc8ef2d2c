from __future__ import annotations

import signal
from pathlib import Path

import anyio
import pytest

from srtd.launch import ExitStatus, FakeLauncher, FakeRun
from srtd.unit import Unit, UnitKind

pytestmark = pytest.mark.anyio


def _unit(name: str) -> Unit:
    return Unit(name=name, kind=UnitKind.SERVICE, phase="p", nodes=("n1",), argv=("x",), log=f"{name}.log")


async def test_scripted_attempts_write_lines_and_exit(tmp_path: Path) -> None:
    script = {"a": [FakeRun(exit_after=0.1, code=3, lines=((0.05, "hello"),)), FakeRun(exit_after=0.1)]}
    async with FakeLauncher(script) as launcher:
        first = await launcher.start(_unit("a"), attempt=0, log_path=tmp_path / "a.log")
        with anyio.fail_after(2):
            assert await first.wait() == ExitStatus(code=3)
        assert (tmp_path / "a.log").read_text() == "hello\n"
        second = await launcher.start(_unit("a"), attempt=1, log_path=tmp_path / "a.log")
        with anyio.fail_after(2):
            assert await second.wait() == ExitStatus(code=0)
        assert (tmp_path / "a.log").read_text() == ""
    assert [(s.unit, s.attempt) for s in launcher.starts] == [("a", 0), ("a", 1)]
    assert launcher.address("n1") == "n1"


async def test_sigterm_and_sigkill(tmp_path: Path) -> None:
    script = {"obedient": FakeRun(term_delay=0.0), "stubborn": FakeRun(term_delay=None), "tidy": FakeRun(term_code=0)}
    async with FakeLauncher(script) as launcher:
        handles = {n: await launcher.start(_unit(n), attempt=0, log_path=tmp_path / f"{n}.log") for n in script}
        for h in handles.values():
            await h.signal(signal.SIGTERM)
        with anyio.fail_after(2):
            assert await handles["obedient"].wait() == ExitStatus(signal=signal.SIGTERM)
            assert await handles["tidy"].wait() == ExitStatus(code=0)
        await anyio.sleep(0.05)
        assert handles["stubborn"].status is None
        await handles["stubborn"].kill()
        assert await handles["stubborn"].wait() == ExitStatus(signal=signal.SIGKILL)
    assert [(s.unit, s.signal) for s in launcher.signals] == [
        ("obedient", 15),
        ("stubborn", 15),
        ("tidy", 15),
        ("stubborn", 9),
    ]
