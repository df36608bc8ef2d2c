"""The one spelling `srtd migrate` leaves to the fidelity test (applied after it, in memory).

Before the `-router` frontend types, `frontend.type: sglang` (or `vllm`) in front of
several workers meant the engine's router; now the bare name is one direct worker.
`srtd migrate` rewrites it in schema 1 files; the upstream examples that still carry
`backend:` next to `schema: 2` keep the old meaning, so the test spells it the new way.
"""

from __future__ import annotations

import copy
from typing import Any


def older_router_spelling(data: dict[str, Any]) -> dict[str, Any]:
    frontend = data.get("frontend") or {}
    roles = data.get("roles") or {}
    if frontend.get("type") not in ("sglang", "vllm"):
        return data
    workers = sum(int((r or {}).get("workers") or 1) for r in roles.values())
    if workers <= 1 and "prefill" not in roles:
        return data
    data = copy.deepcopy(data)
    data["frontend"]["type"] = f"{frontend['type']}-router"
    return data
