from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.helpers import PlanMaker, assert_no_leftovers


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime directory of this test (short: socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="srtd-rt-", dir="/tmp")) / "rt"
    monkeypatch.setenv("SRTD_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


@pytest.fixture
def maker(tmp_path: Path) -> Iterator[PlanMaker]:
    m = PlanMaker(root=tmp_path, token=f"srtdtest-{uuid.uuid4().hex}")
    yield m
    assert_no_leftovers(m.token)
