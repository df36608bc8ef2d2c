"""The rule that picks the log layout each snapshot's srtctl used, from the snapshot alone."""

from __future__ import annotations

from tests.fidelity._compare import load_pair, log_layout_of, pairs

# The snapshots of srtctl versions with logs/workers/, logs/services/logs/ and logs/telemetry/.
SPLIT = {
    "features__lmcache-server-disagg",
    "features__torchrun-pool",
    "sglang__sglang-direct-agg",
    "trtllm__trtllm-serve-agg",
    "vllm__dynamo-agg",
    "vllm__vllm-direct-agg",
}


def test_the_split_snapshots_are_the_ones_writing_into_its_directories() -> None:
    assert {name for name in pairs() if log_layout_of(load_pair(name)[0]) == "split"} == SPLIT


def test_no_snapshot_is_in_between() -> None:
    """A split snapshot logs no worker, frontend, service or scraper at the top (none moved only some)."""
    for name in sorted(SPLIT):
        snap = load_pair(name)[0]
        top = [
            s.name
            for s in snap.steps
            if s.fields.get("output", "").count("/") == 2  # <output>/logs/<file>
            and not s.name.startswith("<unnamed")  # the benchmark's log and host steps stay at the top
        ]
        assert top == [], name
