"""Why a sweep point's job ended, and so what `srtd sweep` does next.

Every ended job is one of four kinds (docs/sweep.md):

- **infrastructure**: not the point's fault (a lost node, NODE_FAIL, BOOT_FAIL, PREEMPTED,
  srtd killed from outside without writing its end): resubmitted up to `--retries`, with
  the nodes to blame excluded;
- **configuration**: the point itself is wrong (srtd refused the recipe, a worker crashed
  on start, the results gate failed): reported with its post-mortem line, not retried;
- **time limit**: the job ran out of time; partial results are kept but never count;
- **measured**: srtd ended 0 and the results gate passed.

`RULES` is the table, first match wins; `classify` applies it.  Pure: the facts are
gathered elsewhere (`_facts`), so the table is tested on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum

from srtd._value import value_class
from srtd.errors import EXIT_INPUT, EXIT_NO_RESULTS


class Outcome(StrEnum):
    MEASURED = "measured"
    INFRASTRUCTURE = "infrastructure"
    CONFIGURATION = "configuration"
    TIME_LIMIT = "time limit"
    CANCELLED = "cancelled"  # ended on purpose (`srtd sweep --cancel`, scancel): not retried


@value_class
class Facts:
    """What is known of one ended job (every field may be missing)."""

    slurm_state: str | None = None  # Slurm's, upper case: COMPLETED, FAILED, NODE_FAIL, ... (None: forgotten)
    nodes: tuple[str, ...] = ()  # the job's nodes, as Slurm listed them
    end_state: str | None = None  # the journal's end: succeeded, failed, cancelled (None: no end written)
    exit_code: int | None = None  # the journal's (else Slurm's) exit code
    reason: str | None = None  # the journal's end reason
    time_limit: bool = False  # the journal says the time limit (its early warning) ended it
    results: bool = False  # a results.json is there (partial or whole)
    postmortem: str | None = None  # the post-mortem's first line


@value_class
class Verdict:
    outcome: Outcome
    why: str  # one line for the failure list
    blame: tuple[str, ...] = ()  # nodes to exclude from the next attempt


_LOST = re.compile(r"\bnode (\S+) lost \(")
_SLURM_INFRA = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"})
_SLURM_TIME = frozenset({"TIMEOUT", "DEADLINE"})


def _lost_nodes(facts: Facts) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_LOST.findall(facts.reason or "")))


def _slurm_infra(f: Facts) -> Verdict | None:
    if f.slurm_state in _SLURM_INFRA:
        blame = f.nodes if f.slurm_state != "PREEMPTED" else ()
        return Verdict(Outcome.INFRASTRUCTURE, f"Slurm: {f.slurm_state}", blame)
    return None


def _time(f: Facts) -> Verdict | None:
    if f.slurm_state in _SLURM_TIME or f.time_limit:
        kept = "partial results kept, not counted" if f.results else "no results"
        return Verdict(Outcome.TIME_LIMIT, f"time limit ({kept})")
    return None


def _node_lost(f: Facts) -> Verdict | None:
    lost = _lost_nodes(f)
    if lost:
        return Verdict(Outcome.INFRASTRUCTURE, f.reason or "node lost", lost)
    return None


def _measured(f: Facts) -> Verdict | None:
    if f.end_state == "succeeded" and f.exit_code == 0:
        return Verdict(Outcome.MEASURED, "measured")
    return None


def _gate(f: Facts) -> Verdict | None:
    if f.end_state is not None and f.exit_code == EXIT_NO_RESULTS:
        return Verdict(Outcome.CONFIGURATION, f"results gate: {f.reason or 'measured nothing'}")
    return None


def _cancelled(f: Facts) -> Verdict | None:
    if f.end_state == "cancelled":
        return Verdict(Outcome.CANCELLED, f.reason or "cancelled")
    if f.end_state is None and f.slurm_state == "CANCELLED":
        return Verdict(Outcome.CANCELLED, "cancelled (scancel) before srtd wrote its end")
    return None


def _failed(f: Facts) -> Verdict | None:
    if f.end_state is not None:  # srtd wrote its end: the point's own failure
        return Verdict(Outcome.CONFIGURATION, f.postmortem or f.reason or f"exit code {f.exit_code}")
    if f.exit_code == EXIT_INPUT:  # srtd refused the frozen recipe before its journal began
        return Verdict(Outcome.CONFIGURATION, f.postmortem or "srtd refused the recipe (exit 2)")
    return None


def _killed(f: Facts) -> Verdict | None:
    # no end in the journal: srtd was killed from outside (or never ran). Its own node, the
    # job's first (the batch host), is the likeliest cause: a head node that died takes srtd
    # with it before Slurm calls the job NODE_FAIL, so Slurm may say only FAILED
    state = f.slurm_state or "forgotten by Slurm"
    return Verdict(Outcome.INFRASTRUCTURE, f"srtd ended without writing its end (Slurm: {state})", f.nodes[:1])


# (name, rule): the first rule that gives a verdict decides.
RULES: tuple[tuple[str, Callable[[Facts], Verdict | None]], ...] = (
    ("slurm infrastructure state", _slurm_infra),
    ("time limit", _time),
    ("node lost under the job", _node_lost),
    ("measured", _measured),
    ("results gate", _gate),
    ("cancelled", _cancelled),
    ("srtd's own failure", _failed),
    ("srtd killed from outside", _killed),
)


def classify(facts: Facts) -> Verdict:
    for _, rule in RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    raise AssertionError("the last rule always decides")  # pragma: no cover
