"""The real recipes of the shared corpus: the verdict on each v2 file is pinned.

VERDICT was computed once with the reference JSON Schema (jsonschema) and with our
loader; they agree on every file except srt-slurm/examples/features/sweep.yaml,
which the reference rejects only because `benchmark.concurrencies: ["{concurrency}"]`
is not a number before the sweep substitutes it.  srtd substitutes first, by design.
`test_reference_schema_agrees_with_the_loader` recomputes the agreement live.
"""

from __future__ import annotations

import csv
import json
from functools import cache
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from srtd.errors import Problem, RecipeError
from srtd.recipe import load_recipes
from tests.reference import CORPUS, REFERENCE, need_shared

# The one file the reference schema and srtd judge differently, on purpose.
SWEEP_EXAMPLE = "srt-slurm/examples/features/sweep.yaml"
# Files using upstream fields newer than the reference schema that srtd supports
# (the tokenspeed engine, reporting.status.job_id_prefix, roles.*.mooncake_store_config).
NEWER_THAN_REFERENCE = (
    "forks/SemiAnalysisAI__srt-slurm/examples/tokenspeed/dynamo-disagg.yaml",
    "forks/SemiAnalysisAI__srt-slurm/examples/tokenspeed/smg-agg.yaml",
    "srt-slurm/examples/features/status-reporting.yaml",
    "srt-slurm/examples/trtllm/dynamo-disagg-mooncake.yaml",
    "srt-slurm/examples/trtllm/trtllm-serve-disagg-mooncake.yaml",
    # start: with_workers, readiness.file and TRT-LLM's Mooncake pool (pool master, mooncake-donor)
    "srt-slurm/examples/trtllm/dynamo-mooncake.yaml",
    "srt-slurm/examples/trtllm/trtllm-serve-mooncake.yaml",
    "srt-slurm/examples/features/vllm-failover.yaml",  # engine.failover.restart*
    "forks/SemiAnalysisAI__srt-slurm/examples/features/amd-power-telemetry.yaml",  # exporter kind, gpu_*
    "srt-slurm/examples/features/result-publishers.yaml",  # reporting.publishers
)
INFERENCEX = "forks/SemiAnalysisAI__InferenceX/benchmarks/multi_node/srt-slurm-recipes/"

VERDICT: dict[str, str] = {
    INFERENCEX + "atom/deepseek-v4/mi355x/disagg-1p1d-tp8-8k1k.yaml": "valid",
    INFERENCEX + "dsr1/sglang/b200-fp4/8k1k/disagg-stp-mtp-variants.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/atom/atomesh-disagg.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/atom/direct.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/docker/vllm-agg-1gpu.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/features/amd-power-telemetry.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/features/lmcache-server-sglang.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/features/mlperf-client.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/features/override.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/features/power-profiling-isolation.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/local/vllm-agg-1gpu.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/sglang/sglang-direct-agg.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/sglang/smg-disagg.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/tokenspeed/dynamo-disagg.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/tokenspeed/smg-agg.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/llm-d-disagg.yaml": "invalid",
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/llm-d-dp-ranks.yaml": "invalid",
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/smg-dep16.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/smg-disagg-grpc.yaml": "valid",
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/vllm-router-moriio-disagg.yaml": "valid",
    "srt-slurm/examples/features/dynamo-source.yaml": "invalid",
    "srt-slurm/examples/features/hle.yaml": "valid",
    "srt-slurm/examples/features/infra-services.yaml": "valid",
    "srt-slurm/examples/features/lmcache-server-disagg.yaml": "valid",
    "srt-slurm/examples/features/lmcache-server.yaml": "valid",
    "srt-slurm/examples/features/node-hooks.yaml": "valid",
    "srt-slurm/examples/features/observability-vllm.yaml": "valid",
    "srt-slurm/examples/features/pools.yaml": "valid",
    "srt-slurm/examples/features/power-noprof.yaml": "invalid",
    "srt-slurm/examples/features/profiling-vllm.yaml": "invalid",
    "srt-slurm/examples/features/profiling.yaml": "valid",
    "srt-slurm/examples/features/result-publishers.yaml": "valid",
    "srt-slurm/examples/features/s3-reporting.yaml": "valid",
    "srt-slurm/examples/features/services.yaml": "invalid",
    "srt-slurm/examples/features/sglang-sidecar-multinode-disagg-dp.yaml": "valid",
    "srt-slurm/examples/features/sglang-sidecar-multinode-dp.yaml": "valid",
    "srt-slurm/examples/features/sglang-weight-cache.yaml": "valid",
    "srt-slurm/examples/features/status-reporting.yaml": "valid",
    "srt-slurm/examples/features/sweep.yaml": "valid",
    "srt-slurm/examples/features/torchrun-pool.yaml": "valid",
    "srt-slurm/examples/features/vllm-failover.yaml": "valid",
    "srt-slurm/examples/features/worker-restart.yaml": "valid",
    "srt-slurm/examples/miles/openenv-tbench2-smoke.yaml": "valid",
    "srt-slurm/examples/miles/qwen3-4b-grpo.yaml": "valid",
    "srt-slurm/examples/miles/qwen3-4b-openenv-tbench2.yaml": "valid",
    "srt-slurm/examples/mocker/dynamo-agg.yaml": "invalid",
    "srt-slurm/examples/sglang/dynamo-agg.yaml": "invalid",
    "srt-slurm/examples/sglang/dynamo-disagg.yaml": "valid",
    "srt-slurm/examples/sglang/sgl-router-disagg.yaml": "valid",
    "srt-slurm/examples/sglang/sglang-router-agg.yaml": "invalid",
    "srt-slurm/examples/sglang/sglang-router-disagg.yaml": "valid",
    "srt-slurm/examples/tilert/glm5-disagg.yaml": "valid",
    "srt-slurm/examples/tilert/glm5-rocm-mooncake-disagg.yaml": "valid",
    "srt-slurm/examples/trtllm/dynamo-agg.yaml": "invalid",
    "srt-slurm/examples/trtllm/dynamo-disagg-mooncake.yaml": "valid",
    "srt-slurm/examples/trtllm/dynamo-disagg-multinode.yaml": "valid",
    "srt-slurm/examples/trtllm/dynamo-disagg.yaml": "invalid",
    "srt-slurm/examples/trtllm/dynamo-mooncake.yaml": "valid",
    "srt-slurm/examples/trtllm/trtllm-serve-agg-numa-local.yaml": "valid",
    "srt-slurm/examples/trtllm/trtllm-serve-agg-numa-memory-local.yaml": "valid",
    "srt-slurm/examples/trtllm/trtllm-serve-agg.yaml": "valid",
    "srt-slurm/examples/trtllm/trtllm-serve-disagg-mooncake.yaml": "valid",
    "srt-slurm/examples/trtllm/trtllm-serve-disagg.yaml": "valid",
    "srt-slurm/examples/trtllm/trtllm-serve-mooncake.yaml": "valid",
    "srt-slurm/examples/vllm/dynamo-agg.yaml": "invalid",
    "srt-slurm/examples/vllm/dynamo-disagg.yaml": "valid",
    "srt-slurm/examples/vllm/vllm-direct-agg.yaml": "invalid",
    "srt-slurm/examples/vllm/vllm-router-agg.yaml": "invalid",
    "srt-slurm/examples/vllm/vllm-router-disagg.yaml": "valid",
}
FIRST_PROBLEM: dict[str, tuple[int, str]] = {
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/llm-d-disagg.yaml": (35, "frontend.epp_config"),
    "forks/SemiAnalysisAI__srt-slurm/examples/vllm/llm-d-dp-ranks.yaml": (30, "frontend.epp_config"),
    "srt-slurm/examples/features/dynamo-source.yaml": (41, "backend"),
    "srt-slurm/examples/features/power-noprof.yaml": (43, "benchmark.client_placement"),
    "srt-slurm/examples/features/profiling-vllm.yaml": (52, "engine.set_cuda_visible_devices"),
    "srt-slurm/examples/features/services.yaml": (34, "backend"),
    "srt-slurm/examples/mocker/dynamo-agg.yaml": (24, "resources.agg_nodes"),
    "srt-slurm/examples/sglang/dynamo-agg.yaml": (24, "resources.agg_nodes"),
    "srt-slurm/examples/sglang/sglang-router-agg.yaml": (23, "resources.agg_nodes"),
    "srt-slurm/examples/trtllm/dynamo-agg.yaml": (23, "resources.agg_nodes"),
    "srt-slurm/examples/trtllm/dynamo-disagg.yaml": (24, "resources.prefill_nodes"),
    "srt-slurm/examples/vllm/dynamo-agg.yaml": (36, "engine.set_cuda_visible_devices"),
    "srt-slurm/examples/vllm/vllm-direct-agg.yaml": (23, "resources.agg_nodes"),
    "srt-slurm/examples/vllm/vllm-router-agg.yaml": (23, "resources.agg_nodes"),
}

# Files whose first problem is a schema 1 key: the v2 field the message must name.
LEGACY_FIRST: dict[str, str] = {
    "srt-slurm/examples/features/dynamo-source.yaml": "`engine` (the engine type and knobs)",
    "srt-slurm/examples/features/power-noprof.yaml": "`benchmark.placement.node`",
    "srt-slurm/examples/features/profiling-vllm.yaml": "`engine.set_visible_devices: true`",
    "srt-slurm/examples/features/services.yaml": "`engine` (the engine type and knobs)",
    "srt-slurm/examples/mocker/dynamo-agg.yaml": "`roles.agg.nodes`",
    "srt-slurm/examples/sglang/dynamo-agg.yaml": "`roles.agg.nodes`",
    "srt-slurm/examples/sglang/sglang-router-agg.yaml": "`roles.agg.nodes`",
    "srt-slurm/examples/trtllm/dynamo-agg.yaml": "`roles.agg.nodes`",
    "srt-slurm/examples/trtllm/dynamo-disagg.yaml": "`roles.prefill.nodes`",
    "srt-slurm/examples/vllm/dynamo-agg.yaml": "`engine.set_visible_devices: true`",
    "srt-slurm/examples/vllm/vllm-direct-agg.yaml": "`roles.agg.nodes`",
    "srt-slurm/examples/vllm/vllm-router-agg.yaml": "`roles.agg.nodes`",
}

# Every schema 1 key left in a file, and the v2 field its problem names.
LEGACY_KEYS: dict[str, str] = {
    "backend": "`engine` (the engine type and knobs) and `roles.<role>.args` / `roles.<role>.env`",
    "resources.agg_nodes": "`roles.agg.nodes`",
    "resources.agg_workers": "`roles.agg.workers`",
    "resources.gpus_per_agg": "`roles.agg.gpus`",
    "resources.prefill_nodes": "`roles.prefill.nodes`",
    "resources.prefill_workers": "`roles.prefill.workers`",
    "resources.gpus_per_prefill": "`roles.prefill.gpus`",
    "resources.decode_nodes": "`roles.decode.nodes`",
    "resources.decode_workers": "`roles.decode.workers`",
    "resources.gpus_per_decode": "`roles.decode.gpus`",
    "dynamo.version": "`dynamo.source.pypi`",
    "benchmark.client_placement": "`benchmark.placement.node`",
}

# Older keys srtctl accepts and ignores: migrate drops them, and the problem says what srtctl does instead.
IGNORED_KEYS: dict[str, str] = {
    "engine.set_cuda_visible_devices": (
        "GPUs go by --device-ids; `engine.set_visible_devices: true` pins them by environment"
    ),
}


def manifest_v2() -> list[str]:
    with (CORPUS / "MANIFEST.tsv").open(newline="") as fh:
        return [row["local_path"] for row in csv.DictReader(fh, delimiter="\t") if row["layout"] == "v2"]


def problems_of(local_path: str) -> tuple[Problem, ...]:
    try:
        load_recipes(CORPUS / local_path)
    except RecipeError as err:
        return err.problems
    return ()


@cache
def reference_validator() -> Any:
    schema = json.loads((REFERENCE / "recipe.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def reference_errors(local_path: str) -> list[Any]:
    data = YAML(typ="safe").load((CORPUS / local_path).read_text())
    return list(reference_validator().iter_errors(data))


def test_verdict_covers_every_v2_file_of_the_manifest() -> None:
    need_shared()
    assert sorted(VERDICT) == sorted(manifest_v2())
    assert set(FIRST_PROBLEM) == {k for k, v in VERDICT.items() if v == "invalid"}
    assert set(LEGACY_FIRST) <= set(FIRST_PROBLEM)


@pytest.mark.parametrize("local_path", sorted(VERDICT), ids=lambda p: p.removeprefix(INFERENCEX))
def test_corpus_verdict(local_path: str) -> None:
    need_shared()
    problems = problems_of(local_path)
    assert ("invalid" if problems else "valid") == VERDICT[local_path], "\n".join(map(str, problems))
    if not problems:
        return
    first = problems[0]
    assert first.file == str(CORPUS / local_path)
    assert (first.line, first.path) == FIRST_PROBLEM[local_path]
    assert first.column is not None
    # The line it points at is where the offending key (or the bad value) is written.
    text = (CORPUS / local_path).read_text().splitlines()[first.line - 1]
    key = first.path.split(".")[-1]
    if first.path == "engine.type" and not text.strip().startswith("type:"):
        key = "engine"  # `engine: <name>`: the type is the value of `engine`
    assert text.strip().startswith(f"{key}:"), text
    if local_path in LEGACY_FIRST:
        assert "an older srt-slurm key" in first.message
        assert LEGACY_FIRST[local_path] in first.message


@pytest.mark.parametrize(
    "local_path", sorted(k for k, v in VERDICT.items() if v == "invalid"), ids=lambda p: p.removeprefix(INFERENCEX)
)
def test_every_v1_leftover_names_its_replacement(local_path: str) -> None:
    need_shared()
    for problem in problems_of(local_path):
        if problem.path in LEGACY_KEYS:
            name = problem.path.split(".")[-1]
            assert problem.message == (
                f"unknown field {name!r}: an older srt-slurm key; schema 2 writes {LEGACY_KEYS[problem.path]} "
                "(`srtd migrate` rewrites it)"
            )
        elif problem.path in IGNORED_KEYS:
            name = problem.path.split(".")[-1]
            assert problem.message == (
                f"unknown field {name!r}: an older srt-slurm key srtctl no longer reads "
                f"({IGNORED_KEYS[problem.path]}); `srtd migrate` drops it"
            )
        else:
            assert "older srt-slurm key" not in problem.message, problem


def test_v1_leftovers_are_all_reported() -> None:
    need_shared()
    legacy = {}
    for local_path in VERDICT:
        found = sorted(p.path for p in problems_of(local_path) if p.path in LEGACY_KEYS or p.path in IGNORED_KEYS)
        if found:
            legacy[local_path.removeprefix("srt-slurm/examples/")] = found
    assert legacy == {
        "features/dynamo-source.yaml": ["backend"],
        "features/power-noprof.yaml": ["benchmark.client_placement"],
        "features/profiling-vllm.yaml": ["engine.set_cuda_visible_devices"],
        "features/services.yaml": ["backend"],
        "mocker/dynamo-agg.yaml": ["backend", "dynamo.version", "resources.agg_nodes", "resources.agg_workers"],
        "sglang/dynamo-agg.yaml": [
            "backend",
            "dynamo.version",
            "resources.agg_nodes",
            "resources.agg_workers",
            "resources.gpus_per_agg",
        ],
        "sglang/sglang-router-agg.yaml": [
            "backend",
            "resources.agg_nodes",
            "resources.agg_workers",
            "resources.gpus_per_agg",
        ],
        "trtllm/dynamo-agg.yaml": ["backend", "resources.agg_nodes", "resources.agg_workers", "resources.gpus_per_agg"],
        "trtllm/dynamo-disagg.yaml": [
            "backend",
            "resources.decode_nodes",
            "resources.decode_workers",
            "resources.gpus_per_decode",
            "resources.gpus_per_prefill",
            "resources.prefill_nodes",
            "resources.prefill_workers",
        ],
        "vllm/dynamo-agg.yaml": ["engine.set_cuda_visible_devices"],
        "vllm/vllm-direct-agg.yaml": [
            "backend",
            "resources.agg_nodes",
            "resources.agg_workers",
            "resources.gpus_per_agg",
        ],
        "vllm/vllm-router-agg.yaml": [
            "backend",
            "resources.agg_nodes",
            "resources.agg_workers",
            "resources.gpus_per_agg",
        ],
    }


def test_reference_schema_agrees_with_the_loader() -> None:
    need_shared()
    disagree = {}
    for local_path in manifest_v2():
        ours = "invalid" if problems_of(local_path) else "valid"
        reference = "invalid" if reference_errors(local_path) else "valid"
        if ours != reference:
            disagree[local_path] = (reference, ours)
    expected = {SWEEP_EXAMPLE: ("invalid", "valid")} | dict.fromkeys(NEWER_THAN_REFERENCE, ("invalid", "valid"))
    assert disagree == expected


def test_reference_rejects_the_sweep_example_only_for_the_placeholder() -> None:
    need_shared()
    errors = reference_errors(SWEEP_EXAMPLE)
    assert [list(e.absolute_path) for e in errors] == [["benchmark", "concurrencies"]]
    assert errors[0].instance == ["{concurrency}"]
    # srtd expands the sweep first; every combination is a valid recipe with an int.
    loaded = load_recipes(CORPUS / SWEEP_EXAMPLE)
    assert len(loaded) > 1
    assert all(isinstance(c, int) for r in loaded for c in r.recipe.benchmark.concurrencies or ())
