"""A toy OpenAI-compatible serving stack, so that `srtd run` can be shown on a laptop.

Four programs, each runnable as ``python -m``:

- ``srtd.toy.worker``: a fake inference engine (prefill, decode or aggregated role) that
  answers ``/v1/completions`` and ``/v1/chat/completions`` with deterministic fake tokens
  at a simulated per-token latency, and can be told to load slowly or crash.
- ``srtd.toy.router``: a gateway in the style of the SGLang model gateway; it health-checks
  its workers, reports them on ``/workers`` and routes requests prefill-then-decode or
  round-robin.
- ``srtd.toy.bench``: a small load generator that reports TTFT, latency and throughput.
- ``srtd.toy.gpus``: answers nvidia-smi's preflight queries with fake GPUs (docs/nodes.md).

Nothing here needs a GPU or any dependency beyond srtd's own.  This module stays tiny
on purpose: it is imported by every ``python -m srtd.toy.*`` start.

The readiness lines below are the contract a log-readiness probe can match on.
"""

from __future__ import annotations

#: Regex (for `re.search`) matching the line a worker prints once, when its port accepts.
WORKER_READY_PATTERN = r"^toy-worker: ready on \S+:\d+$"
#: Regex (for `re.search`) matching the line the router prints once, when its port accepts.
ROUTER_READY_PATTERN = r"^toy-router: ready on \S+:\d+$"

__all__ = ["ROUTER_READY_PATTERN", "WORKER_READY_PATTERN"]
