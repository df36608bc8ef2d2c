"""`srtd schema` covers the reference recipe schema: every property path, same defaults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from srtd.recipe import recipe_json_schema
from tests.reference import REFERENCE, need_shared

# Deliberate differences, each explained in docs/recipe.md ("Differences from srt-slurm").
DIFFERENT_DEFAULT: dict[str, object] = {}


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].split("/")[-1]
        node = {**schema["$defs"][name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _branches(schema: dict[str, Any], node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    node = _resolve(schema, node)
    yield node
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key, []):
            yield from _branches(schema, sub)
    if "items" in node and isinstance(node["items"], dict):
        yield from _branches(schema, node["items"])
    if isinstance(node.get("additionalProperties"), dict):
        yield from _branches(schema, node["additionalProperties"])


def properties(
    schema: dict[str, Any], node: dict[str, Any], prefix: str = "", out: dict[str, list[Any]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every property path of a schema -> its definitions (one per union branch that has it)."""
    out = {} if out is None else out
    for branch in _branches(schema, node):
        for name, sub in branch.get("properties", {}).items():
            path = f"{prefix}{name}"
            if sub in out.setdefault(path, []):
                continue
            out[path].append(sub)
            properties(schema, sub, path + ".", out)
    return out


def defaults(defs: list[dict[str, Any]]) -> list[Any]:
    return sorted(json.dumps(d["default"], sort_keys=True) for d in defs if "default" in d)


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, Any]]:
    need_shared()
    schema = json.loads((REFERENCE / "recipe.schema.json").read_text())
    return properties(schema, schema["$defs"]["Recipe"])


@pytest.fixture(scope="module")
def ours() -> dict[str, dict[str, Any]]:
    schema = recipe_json_schema()
    return properties(schema, schema)


def test_every_reference_path_exists(reference: dict[str, Any], ours: dict[str, Any]) -> None:
    missing = sorted(set(reference) - set(ours))
    assert missing == []
    assert len(reference) > 300  # the walk really went deep


def test_defaults_match(reference: dict[str, Any], ours: dict[str, Any]) -> None:
    wrong = {}
    for path, ref in reference.items():
        if path in DIFFERENT_DEFAULT:
            continue
        missing = set(defaults(ref)) - set(defaults(ours[path]))
        if missing:
            wrong[path] = (defaults(ref), defaults(ours[path]))
    assert wrong == {}


def test_srtd_additions_are_present(ours: dict[str, Any]) -> None:
    for path in ("engine.command", "engine.health.http.path", "services.after", "engine.token_latency_ms"):
        assert path in ours
