"""`--variant NAME` on a grid sweep picks the same points whether or not the grid is walked whole."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from srtd._yaml import Positions
from srtd.recipe._variants import Variant, expand_sweep, matches

# values chosen to collide: prefixes of each other, commas, brackets, '=' inside a value
VALUES = st.sampled_from([1, 10, 100, "1", "1,b=2", "x[0]", "a=1", "", "1,", 2.5])
POINTS = st.lists(VALUES, min_size=1, max_size=4, unique_by=str)  # a repeated value is refused anyway
GRIDS = st.dictionaries(st.sampled_from(["a", "b", "c", "a,b"]), POINTS, min_size=1)


def brute_force(name: str | None, grid: dict[str, list[Any]], pattern: str) -> list[str | None]:
    out: list[str | None] = []
    for combo in itertools.product(*grid.values()):
        label = ",".join(f"{k}={v}" for k, v in zip(grid, combo, strict=True))
        full = f"{name}/{label}" if name else label
        if matches(full, pattern):
            out.append(full)
    return out


@settings(max_examples=300, deadline=None)
@given(
    grid=GRIDS,
    name=st.sampled_from([None, "v", "v[0]"]),
    pick=st.integers(min_value=0),
    noise=st.sampled_from(["", "0", ",", "*", "[", "/"]),
)
def test_a_named_point_is_found_exactly_as_by_walking_the_grid(
    grid: dict[str, list[Any]], name: str | None, pick: int, noise: str
) -> None:
    every = brute_force(name, grid, "*") or [None]
    pattern = (every[pick % len(every)] or "") + noise
    variant = Variant(name, {"name": "t", "sweep": grid}, Positions(None))
    found = [v.name for v in expand_sweep(variant, pattern)]
    assert found == brute_force(name, grid, pattern)


def test_one_point_of_a_million_is_built_without_walking_the_million() -> None:
    values = list(range(100))
    variant = Variant(None, {"name": "t", "sweep": {"a": values, "b": values, "c": values}}, Positions(None))
    assert [v.name for v in expand_sweep(variant, "a=1,b=10,c=99")] == ["a=1,b=10,c=99"]
