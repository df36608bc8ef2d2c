"""Where `setpriv` knows `--pdeathsig`, each local unit is started behind it (the death signal);
the option is found in the binary's own option table, without running it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from srtd.launch._local import _setpriv_pdeathsig


def test_this_machines_setpriv_is_used_for_the_death_signal() -> None:
    path = shutil.which("setpriv")
    if path is None:
        pytest.skip("no setpriv here")
    assert _setpriv_pdeathsig() == [path, "--pdeathsig", "KILL", "--"]


@pytest.mark.parametrize(
    ("content", "used"),
    [
        (b"\x7fELF\0reuid\0pdeathsig\0regid\0", True),  # the option's name in getopt's table
        (b"\x7fELF\0reuid\0regid\0 --pdeathsig is for newer versions\0", False),  # an older setpriv
        (b"", False),
    ],
)
def test_a_setpriv_without_the_option_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, used: bool
) -> None:
    program = tmp_path / "setpriv"
    program.write_bytes(content)
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _setpriv_pdeathsig() == ([str(program), "--pdeathsig", "KILL", "--"] if used else None)


def test_a_setpriv_that_is_no_program_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "setpriv"
    program.mkdir()  # which() finds no executable file: none
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _setpriv_pdeathsig() is None
