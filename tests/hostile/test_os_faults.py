"""Real file-system faults (a full tmpfs, a read-only one) reach the user as one line, exit 3."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.hostile.helpers import srtd

V1 = "name: x\nbackend:\n  type: sglang\n"


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    mounted: list[Path] = []

    def make(name: str, options: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        subprocess.run(["umount", str(point)], check=False)


def _fill(path: Path) -> None:
    """Write until the file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def test_migrate_onto_a_full_disk_is_exit_3_and_leaves_nothing(
    mount: Callable[[str, str], Path], tmp_path: Path
) -> None:
    full = mount("full", "size=64k")
    _fill(full / "filler")
    (tmp_path / "v1.yaml").write_text(V1)
    result = srtd("migrate", str(tmp_path / "v1.yaml"), "-o", str(full / "v2.yaml"))
    assert (result.code, result.stderr) == (3, f"srtd: {full}/v2.yaml: cannot write: No space left on device\n")
    assert sorted(p.name for p in full.iterdir()) == ["filler"]  # no temporary file left behind


def test_migrate_in_place_on_a_read_only_file_system_is_exit_3(
    mount: Callable[[str, str], Path], tmp_path: Path
) -> None:
    ro = mount("ro", "size=64k")
    (ro / "v1.yaml").write_text(V1)
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    result = srtd("migrate", "-i", str(ro / "v1.yaml"))
    assert (result.code, result.stderr) == (3, f"srtd: {ro}/v1.yaml: cannot write: Read-only file system\n")
    assert (ro / "v1.yaml").read_text() == V1
