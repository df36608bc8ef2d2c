"""`srtd submit` POSTs each submitted job with `report_submitted` (sbatch itself is tested under Slurm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import srtd.reporting
from srtd.cli import _submit
from srtd.cluster import Cluster
from srtd.recipe import load_recipes

EXAMPLE = Path(__file__).resolve().parents[2] / "recipes" / "features" / "status-reporting.yaml"


def test_a_submitted_job_is_posted_with_its_slurm_job_id(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(srtd.reporting, "report_submitted", lambda *a, **kw: calls.append((a, kw)) or True)
    [loaded] = load_recipes(EXAMPLE)
    sub = _submit._prepare(loaded, Cluster(), None)
    sub.job_id = "4242"
    _submit._report(sub)
    [(args, kwargs)] = calls
    assert args[0].endpoints == ("http://127.0.0.1:8080",)
    assert args[1] == "4242"
    assert kwargs == {"job_name": "toy-status", "recipe": str(EXAMPLE), "metadata": {}}
