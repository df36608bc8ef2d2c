"""Fuzzing the loader: whatever the file holds, only `RecipeError` comes out.

Valid recipes (as Python data) are mutated at random (a value replaced by a
random scalar, list or mapping, a key deleted, inserted, renamed, garbage nested
in), dumped with ruamel.yaml and loaded; so are random YAML-ish text, random
bytes decoded lossily, and dumped recipes with random characters spliced in.
Every problem must have a message, and a line whenever the file is a mapping.
"""

from __future__ import annotations

import copy
import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from srtd._yaml import parse_text
from srtd.errors import RecipeError
from srtd.recipe import load_text

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

IMAGE = "/containers/img.sqsh"
MODEL = {"path": "/models/m", "container": IMAGE, "precision": "fp8"}

SEEDS: list[dict[str, Any]] = [
    {  # aggregated, the smallest useful recipe
        "schema": 2,
        "name": "agg",
        "model": MODEL,
        "resources": {"gpus_per_node": 8},
        "engine": "sglang",
        "roles": {"agg": {"nodes": 1, "workers": 1, "gpus": 8, "restart": "on-failure"}},
        "frontend": {"type": "sglang-router"},
    },
    {  # disaggregated vLLM with colocated decode, a benchmark and a service with readiness
        "schema": 2,
        "name": "disagg",
        "model": MODEL,
        "slurm": {"account": "a", "partition": "p", "time_limit": "01:00:00"},
        "resources": {"gpu_type": "h100", "gpus_per_node": 8},
        "engine": {"type": "vllm", "connector": "nixl"},
        "roles": {
            "prefill": {"nodes": 1, "workers": 1, "gpus": 4, "args": {"tensor-parallel-size": 4}},
            "decode": {"nodes": "colocate", "workers": 1, "gpus": 4, "env": {"A": "1"}},
        },
        "frontend": {"type": "dynamo", "placement": {"node": "head"}},
        "benchmark": {"type": "sa-bench", "isl": 1024, "osl": 1024, "concurrencies": [4, 8]},
        "services": [
            {
                "name": "etcd",
                "type": "etcd",
                "placement": {"node": "infra"},
                "readiness": {"http": {"port": 2379, "path": "/health"}},
            },
            {"name": "side", "command": ["python", "-m", "side"], "metrics": {"port": 9100}},
        ],
        "health_check": {"max_attempts": 10, "interval_seconds": 5},
    },
    {  # custom engine with a health probe, reporting and observability
        "schema": 2,
        "name": "custom",
        "model": MODEL,
        "resources": {"gpus_per_node": 4},
        "engine": {
            "type": "custom",
            "command": ["python", "-m", "w", "--port", "{port}"],
            "health": {"http": {"path": "/ready"}, "timeout_seconds": 60},
        },
        "roles": {"agg": {"nodes": 2, "workers": 2}},
        "frontend": {"type": "toy-router"},
        "reporting": {"status": {"endpoint": "https://status.example.com"}, "s3": {"bucket": "b"}},
        "observability": {"enable_otel": True, "otel_endpoint": "http://otel:4317"},
        "dynamo": {"source": {"pypi": "0.7.0"}},
    },
    {  # an override file with a zip block
        "schema": 2,
        "base": {
            "name": "ov",
            "model": MODEL,
            "resources": {"gpus_per_node": 8},
            "engine": "trtllm",
            "roles": {"agg": {"nodes": 1, "workers": 1, "gpus": 8}},
            "frontend": {"type": "dynamo"},
        },
        "override_tp4": {"roles": {"agg": {"gpus": 4, "workers": 2}}},
        "zip_override_ctx": {"name": ["a", "b"], "roles": {"agg": {"gpus": [2, 4]}}},
    },
    {  # a sweep
        "schema": 2,
        "name": "sweep-{c}",
        "model": MODEL,
        "resources": {"gpus_per_node": 8},
        "engine": "sglang",
        "roles": {"agg": {"nodes": 1, "workers": "{w}"}},
        "benchmark": {"type": "sa-bench", "concurrencies": ["{c}"]},
        "sweep": {"c": [1, 2], "w": [1, 2]},
    },
]

KNOWN_KEYS = (
    "schema",
    "name",
    "model",
    "resources",
    "engine",
    "roles",
    "agg",
    "prefill",
    "decode",
    "nodes",
    "workers",
    "gpus",
    "type",
    "frontend",
    "placement",
    "node",
    "pool",
    "per",
    "services",
    "readiness",
    "port",
    "http",
    "log",
    "command",
    "restart",
    "sweep",
    "base",
    "override_x",
    "zip_override_y",
    "backend",
    "agg_nodes",
    "source",
    "rev",
    "mode",
    "parameters",
)

keys = st.sampled_from(KNOWN_KEYS) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["colocate", "head", "main", "{c}", "{w}", "", " ", "sglang", "custom", "zip", "grid", "1"])
)
garbage = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)


def containers(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every mapping and list in `data`."""
    out: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        out.append(path)
        for key, value in data.items():
            out.extend(containers(value, (*path, key)))
    elif isinstance(data, list):
        out.append(path)
        for i, value in enumerate(data):
            out.extend(containers(value, (*path, i)))
    return out


def at(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def mutate(draw: st.DrawFn, data: dict[str, Any]) -> dict[str, Any]:
    """One random change at a random place."""
    parent = at(data, draw(st.sampled_from(containers(data))))
    op = draw(st.sampled_from(["replace", "delete", "insert", "rename", "nest"]))
    slots = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
    if op == "insert" or not slots:
        if isinstance(parent, dict):
            parent[draw(keys)] = draw(garbage)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(garbage))
        return data
    slot = draw(st.sampled_from(slots))
    if op == "replace":
        parent[slot] = draw(garbage)
    elif op == "delete":
        del parent[slot]
    elif op == "rename" and isinstance(parent, dict):
        parent[draw(keys)] = parent.pop(slot)
    else:  # nest: bury the value in garbage
        parent[slot] = {draw(keys): parent[slot], draw(keys): draw(garbage)}
    return data


def dump(data: Any) -> str:
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def is_mapping(text: str) -> tuple[bool, Any]:
    try:
        data, _ = parse_text(text, "f.yaml")
    except RecipeError:
        return False, None
    return isinstance(data, dict), data


def check(text: str) -> None:
    """Load `text`; anything but a clean success or a RecipeError fails the test."""
    try:
        load_text(text, "f.yaml")
    except RecipeError as err:
        problems = err.problems
    else:
        return
    assert problems, "RecipeError without problems"
    mapping, _ = is_mapping(text)
    for problem in problems:
        assert isinstance(problem.message, str)
        assert problem.message.strip(), problem
        assert problem.file == "f.yaml", problem
        if mapping:
            assert problem.line is not None, f"no line: {problem!r}\n---\n{text}"
            assert problem.line >= 1
            assert problem.column is None or problem.column >= 1


def test_seeds_are_valid() -> None:
    for seed in SEEDS:
        assert load_text(dump(seed), "f.yaml")


@FUZZ
@given(st.data())
def test_mutated_recipes(data: st.DataObject) -> None:
    recipe = copy.deepcopy(data.draw(st.sampled_from(SEEDS)))
    for _ in range(data.draw(st.integers(1, 4))):
        recipe = mutate(data.draw, recipe)
    check(dump(recipe))


@settings(FUZZ, max_examples=120)
@given(st.data())
def test_mutated_recipes_many(data: st.DataObject) -> None:
    # The same with a single mutation: most inputs then differ from a valid recipe in one place,
    # which is what a user's mistake looks like.
    recipe = mutate(data.draw, copy.deepcopy(data.draw(st.sampled_from(SEEDS))))
    check(dump(recipe))


YAMLISH = st.text(
    alphabet=st.sampled_from(list("abcschema2name:-[]{}#&*!|>'\"%@`,?. \n\t0123456789")) | st.characters(),
    max_size=120,
)


@FUZZ
@given(YAMLISH)
def test_random_yaml_text(text: str) -> None:
    check(text)


@settings(FUZZ, max_examples=30)
@given(st.binary(max_size=200))
def test_random_bytes_decoded_lossily(raw: bytes) -> None:
    check(raw.decode("utf-8", errors="replace"))


@settings(FUZZ, max_examples=30)
@given(st.sampled_from(SEEDS), st.data())
def test_recipe_text_with_characters_spliced_in(seed: dict[str, Any], data: st.DataObject) -> None:
    text = dump(seed)
    position = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(alphabet=st.sampled_from(list(":-[]{}#&*!|>'\" \t\n")), min_size=1, max_size=4))
    check(text[:position] + junk + text[position:])
