"""The snapshots are of several srtctl commits, and on one point they disagree among themselves.

Whether workers behind a frontend that is not Dynamo's get Dynamo's environment (DYN_*,
ETCD_ENDPOINTS) depends on the commit that made the snapshot, not on the recipe: for the
same frontend kind and the same log layout, some snapshots set it and others do not.  No
rule srtd could follow matches both, which is why those variables are `_allowed.SUPERSEDED`
(srtd follows srtctl's newest code, which gives them only to Dynamo workers).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from ruamel.yaml import YAML

from tests.fidelity._compare import _WORKER_STEP, LAUNCH, load_pair, log_layout_of, pairs
from tests.reference import need_shared


def workers_with_dynamo_env() -> dict[tuple[str, str], dict[bool, set[str]]]:
    """(frontend kind, log layout) -> {whether its workers get DYN_REQUEST_PLANE: the examples}."""
    seen: dict[tuple[str, str], dict[bool, set[str]]] = defaultdict(lambda: {True: set(), False: set()})
    for name in pairs():
        snap, recipe_file = load_pair(name)
        recipe = YAML(typ="safe").load(recipe_file.read_text()) or {}
        frontend = str((recipe.get("frontend") or {}).get("type", "dynamo"))  # as written
        if frontend in ("dynamo", "none"):
            continue
        workers = [s for s in snap.steps if _WORKER_STEP.fullmatch(s.name)]
        if workers:
            has = any("DYN_REQUEST_PLANE" in s.env for s in workers)
            seen[(frontend, log_layout_of(snap))][has].add(name)
    return seen


def test_the_same_frontend_and_layout_get_dynamos_environment_in_some_snapshots_only() -> None:
    need_shared()
    if not LAUNCH.is_dir():
        pytest.skip(f"no launch snapshots at {LAUNCH}")
    seen = workers_with_dynamo_env()
    # the recipe's own frontend kind, as written (older recipes' `sglang` is the router)
    router = seen[("sglang-router", "flat")]
    assert "features__profiling" in router[True]
    assert {"features__node-hooks", "sglang__sglang-router-disagg"} <= router[False]
    sglang = seen[("sglang", "flat")]
    assert {"features__pools", "features__status-reporting"} <= sglang[True]
    assert "features__amd-power-telemetry" in sglang[False]
    # trtllm-serve: the numa examples' snapshots set it; the disaggregated Mooncake one does not
    serve = seen[("trtllm_serve", "flat")]
    assert "trtllm__trtllm-serve-agg-numa-local" in serve[True]
    assert "trtllm__trtllm-serve-disagg-mooncake" in serve[False]
    # and srtctl's newest snapshots (split layout) never do
    assert not any(by[True] for (_, layout), by in seen.items() if layout == "split")
