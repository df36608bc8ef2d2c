"""The classification table: journal ends by Slurm states, to what `srtd sweep` does with the point."""

from __future__ import annotations

import pytest

from srtd.sweep import Facts, Outcome, classify
from srtd.sweep._classify import RULES

LOST = "prefill_0 failed: node node2 lost (slurmd at 127.0.0.3:17002 has not answered for 12 s)"

CASES = [
    # (Slurm state, journal end, exit code, reason, extra facts) -> (outcome, why starts with, blame)
    ("COMPLETED", "succeeded", 0, "benchmark exited 0", {}, Outcome.MEASURED, "measured", ()),
    ("COMPLETED", "failed", 5, "benchmark measured nothing", {}, Outcome.CONFIGURATION, "results gate: ", ()),
    ("FAILED", "failed", 1, "decode_0 exited 2 before ready", {}, Outcome.CONFIGURATION, "decode_0 exited 2", ()),
    (
        "FAILED",
        "failed",
        1,
        "decode_0 exited 2 before ready",
        {"postmortem": "decode_0 exited with code 2 before it was ready"},
        Outcome.CONFIGURATION,
        "decode_0 exited with code 2",
        (),
    ),
    ("FAILED", None, 2, None, {}, Outcome.CONFIGURATION, "srtd refused the recipe", ()),
    ("FAILED", "failed", 1, LOST, {"nodes": ("node1", "node2")}, Outcome.INFRASTRUCTURE, LOST, ("node2",)),
    ("NODE_FAIL", None, None, None, {"nodes": ("node3",)}, Outcome.INFRASTRUCTURE, "Slurm: NODE_FAIL", ("node3",)),
    ("BOOT_FAIL", None, None, None, {"nodes": ("node4",)}, Outcome.INFRASTRUCTURE, "Slurm: BOOT_FAIL", ("node4",)),
    ("PREEMPTED", None, None, None, {"nodes": ("node1",)}, Outcome.INFRASTRUCTURE, "Slurm: PREEMPTED", ()),
    # srtd SIGKILLed from outside: no end in its journal
    ("FAILED", None, 137, None, {}, Outcome.INFRASTRUCTURE, "srtd ended without writing its end (Slurm: FAILED)", ()),
    # ... on a node that died under it (Slurm says FAILED before NODE_FAIL): its own node is blamed
    (
        "FAILED",
        None,
        137,
        None,
        {"nodes": ("node5", "node6")},
        Outcome.INFRASTRUCTURE,
        "srtd ended without writing its end (Slurm: FAILED)",
        ("node5",),
    ),
    (None, None, None, None, {}, Outcome.INFRASTRUCTURE, "srtd ended without writing its end (Slurm: forgotten", ()),
    ("TIMEOUT", "cancelled", 143, "received SIGTERM", {}, Outcome.TIME_LIMIT, "time limit (no results)", ()),
    ("CANCELLED", "cancelled", 143, "received SIGTERM", {}, Outcome.CANCELLED, "received SIGTERM", ()),
    ("CANCELLED", None, 143, None, {}, Outcome.CANCELLED, "cancelled (scancel)", ()),
]


@pytest.mark.parametrize(("slurm", "end", "code", "reason", "extra", "outcome", "why", "blame"), CASES)
def test_each_end_is_classified(
    slurm: str | None,
    end: str | None,
    code: int | None,
    reason: str | None,
    extra: dict[str, object],
    outcome: Outcome,
    why: str,
    blame: tuple[str, ...],
) -> None:
    facts = Facts(slurm_state=slurm, end_state=end, exit_code=code, reason=reason, **extra)  # type: ignore[arg-type]
    verdict = classify(facts)
    assert verdict.outcome is outcome
    assert verdict.why.startswith(why), verdict.why
    assert verdict.blame == blame


def test_a_timeout_with_partial_results_is_a_time_limit_never_measured() -> None:
    # Slurm's TIMEOUT, even with srtd's own end succeeded and results on disk
    verdict = classify(
        Facts(slurm_state="TIMEOUT", end_state="succeeded", exit_code=0, reason="benchmark exited 0", results=True)
    )
    assert verdict.outcome is Outcome.TIME_LIMIT
    assert verdict.why == "time limit (partial results kept, not counted)"


def test_the_early_warning_of_the_time_limit_is_a_time_limit_whatever_slurm_says() -> None:
    verdict = classify(
        Facts(slurm_state="COMPLETED", end_state="cancelled", exit_code=138, time_limit=True, results=True)
    )
    assert verdict.outcome is Outcome.TIME_LIMIT


def test_slurm_infrastructure_wins_over_a_journal_that_says_succeeded() -> None:
    verdict = classify(Facts(slurm_state="NODE_FAIL", end_state="succeeded", exit_code=0, nodes=("n1",)))
    assert (verdict.outcome, verdict.blame) == (Outcome.INFRASTRUCTURE, ("n1",))


def test_every_rule_is_named_and_the_last_one_always_decides() -> None:
    names = [name for name, _ in RULES]
    assert len(names) == len(set(names))
    assert RULES[-1][1](Facts()) is not None
