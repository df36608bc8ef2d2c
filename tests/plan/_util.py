"""Small recipes for plan tests: a common head and one place to build a plan."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from srtd.cluster import Cluster
from srtd.errors import PlanError, Problem, RecipeError
from srtd.plan import build_plan, check_recipe
from srtd.recipe import LoadedRecipe, load_text
from srtd.unit import Plan

FILE = "r.yaml"

# Five lines; a body appended to it starts on line 6.  The benchmark is `manual` by default.
HEAD = """\
schema: 2
name: t
model: {path: /models/m, container: img.sqsh, precision: bf16}
resources: {gpus_per_node: 8}
observability: {tachometer: {enabled: false}}
"""
HEAD_LINES = 5


#: One prefill and one decode worker behind Dynamo's frontend: the smallest disaggregated recipe.
PD = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 1, workers: 1}
frontend: {type: dynamo, enable_multiple_frontends: false}
"""


def loaded(body: str, *, head: str = HEAD) -> LoadedRecipe:
    return load_text(head + textwrap.dedent(body), FILE)[0]


def plan(body: str, cluster: Cluster | None = None, *, head: str = HEAD, **kwargs: Any) -> Plan:
    return build_plan(loaded(body, head=head), cluster or Cluster(), **kwargs)


def plan_error(body: str, cluster: Cluster | None = None, *, head: str = HEAD, **kwargs: Any) -> str:
    with pytest.raises(PlanError) as info:
        plan(body, cluster, head=head, **kwargs)
    return str(info.value)


def load_problems(body: str, *, head: str = HEAD) -> list[tuple[int | None, str, str]]:
    """(line, path, message) of what the loader refuses."""
    with pytest.raises(RecipeError) as info:
        load_text(head + textwrap.dedent(body), FILE)
    return [(p.line, p.path, p.message) for p in info.value.problems]


def check_problems(body: str, *, head: str = HEAD) -> list[tuple[int | None, str, str]]:
    """(line, path, message) of what the registry rules (`check_recipe`) refuse."""
    found: list[Problem] = check_recipe(loaded(body, head=head))
    return [(p.line, p.path, p.message) for p in found]


def names(p: Plan) -> list[str]:
    return [u.name for u in p.units]


def after(p: Plan, unit: str) -> list[tuple[str, str]]:
    return [(e.unit, e.condition.value) for e in p.unit(unit).after]
