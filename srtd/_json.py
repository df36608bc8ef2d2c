"""JSON from anyone else (a socket, an HTTP body, a file a job wrote), decoded with its nesting bounded.

Python's `json` recurses once per level: deep enough nesting raises RecursionError (the C
decoder's guard), which is no `ValueError`, and whatever walks a deep result later (pydantic,
`json.dumps`, our own code) can hit the same limit anywhere.  `loads_bounded` turns both into
one `ValueError`: the decoder's guard is caught, and what it built is held to `max_depth`,
walked level by level (no recursion).  Counting the brackets first keeps that walk off every
ordinary document.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32  # objects and arrays inside each other; real documents use a handful

_CONTAINERS = (dict, list)


class TooDeep(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def depth_within(value: Any, limit: int) -> bool:
    """Whether `value` nests at most `limit` objects and arrays (itself, if one, is level 1)."""
    level: list[Any] = [value]
    for _ in range(limit):
        nested = [
            item
            for node in level
            if isinstance(node, _CONTAINERS)
            for item in (node.values() if isinstance(node, dict) else node)
            if isinstance(item, _CONTAINERS)
        ]
        if not nested:
            return True
        level = [item for item in nested if item]  # an empty one is a level, with nothing below
    return False


def loads_bounded(data: bytes | bytearray | str, max_depth: int = MAX_DEPTH, *, constants: bool = False) -> Any:
    """`json.loads`, but one `ValueError` (`TooDeep`) for nesting beyond `max_depth`, and for
    `NaN` / `Infinity`, which are not JSON (unless `constants`: a reader that refuses them
    itself, naming the field)."""
    try:
        value = json.loads(data, parse_constant=None if constants else _refuse_constant)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if isinstance(data, str):
        brackets = data.count("[") + data.count("{")
    else:
        brackets = data.count(b"[") + data.count(b"{")
    if brackets > max_depth and not depth_within(value, max_depth):
        raise TooDeep(max_depth)
    return value
