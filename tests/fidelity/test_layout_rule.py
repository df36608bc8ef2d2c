"""The rule that picks the log layout each snapshot's srtctl used, from the snapshot alone."""

from __future__ import annotations

import pytest

from tests.fidelity._compare import load_pair, log_layout_of, pairs
from tests.reference import need_shared


@pytest.fixture(autouse=True)
def _snapshots() -> None:
    need_shared()  # without the snapshots there is no rule to check, not a rule that finds none


# The snapshots of srtctl versions with logs/workers/, logs/services/logs/ and logs/telemetry/.
SPLIT = {
    "features__lmcache-server-disagg",
    "features__torchrun-pool",
    "sglang__sglang-direct-agg",
    "trtllm__trtllm-serve-agg",
    "vllm__dynamo-agg",
    "vllm__vllm-direct-agg",
}


def split_snapshots() -> set[str]:
    return {name for name in pairs() if log_layout_of(load_pair(name)[0]) == "split"}


def test_the_split_snapshots_are_the_ones_writing_into_its_directories() -> None:
    found = split_snapshots()
    # snapshots added to the folder later may be of either layout; these known ones must be found so
    assert found >= SPLIT
    assert not {"features__pools", "sglang__sglang-router-agg", "trtllm__dynamo-disagg"} & found  # flat ones


def test_no_snapshot_is_in_between() -> None:
    """A split snapshot logs no worker, frontend, service or scraper at the top (none moved only some)."""
    for name in sorted(split_snapshots()):
        snap = load_pair(name)[0]
        top = [
            s.name
            for s in snap.steps
            if s.fields.get("output", "").count("/") == 2  # <output>/logs/<file>
            and not s.name.startswith("<unnamed")  # the benchmark's log and host steps stay at the top
        ]
        assert top == [], name
