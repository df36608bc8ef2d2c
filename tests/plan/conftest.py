"""Plan tests read no cluster settings and no Slurm allocation from the machine they run on."""

from __future__ import annotations

import os

import pytest

KEEP = {"SRTD_SHARED", "SRTD_REGEN_GOLDEN"}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in list(os.environ):
        if (name.startswith("SRTD_") and name not in KEEP) or name.startswith("SLURM_"):
            monkeypatch.delenv(name)
    # ~/.config/srtd/srtslurm.yaml must not leak into a plan
    monkeypatch.setenv("HOME", str(tmp_path_factory.getbasetemp() / "home"))
