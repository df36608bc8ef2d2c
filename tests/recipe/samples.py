"""Small recipes the recipe tests mutate in one place, so every line number is known."""

from __future__ import annotations

import textwrap

import pytest

from srtd.errors import Problem, RecipeError
from srtd.recipe import LoadedRecipe, load_text

FILE = "r.yaml"

# Line numbers matter: tests point at them.  Anything appended starts on line 17.
BASE = """\
schema: 2
name: t
model:
  path: /models/m
  container: img.sqsh
  precision: fp8
resources:
  gpus_per_node: 8
engine: sglang
roles:
  agg:
    nodes: 1
    workers: 1
    gpus: 8
frontend:
  type: sglang-router
"""
BASE_LINES = 16

# Prefill on one node, decode colocated on its free GPUs: 4 + 4 of 8.
DISAGG = """\
schema: 2
name: t
model:
  path: /models/m
  container: img.sqsh
  precision: fp8
resources:
  gpus_per_node: 8
engine: sglang
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 4
  decode:
    nodes: colocate
    workers: 1
    gpus: 4
frontend:
  type: sglang-router
"""

# BASE with one service; its lines are 17-19, anything appended starts on line 20.
WITH_SERVICE = (
    BASE
    + """\
services:
  - name: a
    command: [sleep, inf]
"""
)

# An override file: `base:` is BASE indented (lines 2-17), one override block (18-21).
OVERRIDES = (
    "schema: 2\nbase:\n"
    + textwrap.indent(BASE.removeprefix("schema: 2\n"), "  ")
    + """\
override_tp2:
  roles:
    agg:
      gpus: 4
"""
)
OVERRIDES_LINES = 21


def sub(old: str, new: str, base: str = BASE) -> str:
    """`base` with the one occurrence of `old` replaced."""
    assert base.count(old) == 1, f"{old!r} occurs {base.count(old)} times"
    return base.replace(old, new)


def load(text: str, *, variant: str | None = None) -> list[LoadedRecipe]:
    return load_text(text, FILE, variant=variant)


def problems_of(text: str, *, variant: str | None = None) -> tuple[Problem, ...]:
    with pytest.raises(RecipeError) as info:
        load_text(text, FILE, variant=variant)
    assert info.value.problems, "a RecipeError without problems"
    return info.value.problems


def problems(text: str, *, variant: str | None = None) -> list[tuple[int | None, int | None, str, str]]:
    """(line, column, path, message) of every problem, in the order the loader reports them."""
    return [(p.line, p.column, p.path, p.message) for p in problems_of(text, variant=variant)]
