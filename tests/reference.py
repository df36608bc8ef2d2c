"""Where the shared reference material lives (outside the repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("SRTD_TEST_SHARED", Path(__file__).resolve().parents[2] / "shared"))
REFERENCE = SHARED / "reference"
CORPUS = SHARED / "corpus"


def need_shared() -> None:
    if not (REFERENCE / "recipe.schema.json").is_file():
        pytest.skip(f"shared reference material not found at {SHARED} (set SRTD_TEST_SHARED)")
