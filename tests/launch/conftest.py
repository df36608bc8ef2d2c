from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.supervisor.helpers import PlanMaker, assert_no_leftovers


@pytest.fixture
def maker(tmp_path: Path) -> Iterator[PlanMaker]:
    """A plan factory whose processes all carry one unique token; none may outlive the test."""
    m = PlanMaker(root=tmp_path, token=f"srtdtest-{uuid.uuid4().hex}")
    yield m
    assert_no_leftovers(m.token)
