"""Override files and sweeps: one file, several recipes.

An override file has `base:` plus blocks named `override_<name>` (one variant,
deep-merged over the base) and `zip_override_<name>` (several variants: list
leaves are zipped, the i-th element going to variant i; a one-element list
applies to every variant).  In a merge, mappings merge key by key, `null`
removes a key, and anything else (lists included) replaces.

A top-level `sweep:` maps parameter names to lists of values; every combination
(grid) becomes one recipe with `{name}` placeholders substituted.  A string that
is exactly one placeholder takes the value with its type (`"{concurrency}"` -> 4).
`sweep: {mode: zip, parameters: {...}}` pairs values by position instead.
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import Any

from srtd._value import value_class
from srtd._yaml import PathKey, Positions
from srtd.errors import Problem, RecipeError

OVERRIDE_KEY = re.compile(r"^(zip_)?override_(.+)$")

# A file holds at most this many recipes (override variants times sweep combinations);
# each is validated and planned (about 10 ms each), so the count is checked before any
# is built.  The largest real files make 16 recipes; 1024 validate in about 10 s.
MAX_VARIANTS = 1024
# Characters a sweep's `{name}` substitution may make of one string, and of all the
# strings of all its recipes together: a value repeated through a string many times
# (`{v}{v}{v}...`) multiplies its length, and is measured before the string is built.
MAX_SUBSTITUTED = 1 << 20
MAX_SUBSTITUTED_TOTAL = 64 << 20
# `--variant` picks from a larger sweep by name, without building the others; the
# names themselves are cheap, but not free.
MAX_SEARCHED = 1_000_000
SHOWN_NAMES = 10


@value_class
class Variant:
    """One recipe of a file, before validation."""

    name: str | None  # None for a plain recipe
    data: Any
    positions: Positions


def is_override_file(data: Any) -> bool:
    return isinstance(data, dict) and "base" in data


def expand_overrides(data: dict[str, Any], positions: Positions) -> list[Variant]:
    problems: list[Problem] = []
    for key in data:
        if key not in ("base", "schema") and not OVERRIDE_KEY.match(key):
            problems.append(
                positions.problem(
                    f"unknown field {key!r}; an override file has `base`, `override_<name>` and "
                    "`zip_override_<name>` blocks",
                    (key,),
                    prefer_key=True,
                )
            )
    base = data["base"]
    if not isinstance(base, dict):
        problems.append(positions.problem("`base` must be a mapping", ("base",)))
    if problems:
        raise RecipeError(problems)
    base = dict(base)
    if "schema" in data and "schema" not in base:
        base["schema"] = data["schema"]
    base_positions = positions.shifted(("base",))
    if "schema" in data:
        base_positions.keys.setdefault(("schema",), positions.keys.get(("schema",), (1, 1)))
        base_positions.values.setdefault(("schema",), positions.values.get(("schema",), (1, 1)))
    variants: list[Variant] = []
    for key, block in data.items():
        match = OVERRIDE_KEY.match(key)
        if not match:
            continue
        if not isinstance(block, dict):
            raise RecipeError([positions.problem(f"`{key}` must be a mapping", (key,))])
        block_positions = positions.shifted((key,))
        merged_positions = _overlay(base_positions, block_positions)
        if match.group(1):
            for i, part in enumerate(_unzip(key, block, positions)):
                variants.append(Variant(f"{key}[{i}]", deep_merge(base, part), merged_positions))
        else:
            variants.append(Variant(key, deep_merge(base, block), merged_positions))
    if not variants:
        variants.append(Variant("base", base, base_positions))
    _refuse_same_variants(variants, positions)
    return variants


def _refuse_same_variants(variants: list[Variant], positions: Positions) -> None:
    """Two override blocks that make the same recipe would submit one job twice."""
    seen: dict[str, str] = {}
    for variant in variants:
        canonical = json.dumps(variant.data, sort_keys=True, default=str)
        if canonical in seen:
            block = (variant.name or "").split("[")[0]
            where = _line_of(positions, (seen[canonical].split("[")[0],), keys=True)
            message = f"{variant.name} makes the same recipe as {seen[canonical]}{where}: {_ONE_JOB}"
            raise RecipeError([positions.problem(message, (block,), prefer_key=True)])
        seen[canonical] = variant.name or ""


def _overlay(base: Positions, top: Positions) -> Positions:
    return Positions(base.file, {**base.keys, **top.keys}, {**base.values, **top.values})


def deep_merge(base: Any, top: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(top, dict):
        return copy.deepcopy(top)
    out = copy.deepcopy(base)
    for key, value in top.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _zip_leaves(block: Any, path: PathKey = ()) -> list[tuple[PathKey, list[Any]]]:
    if isinstance(block, dict):
        leaves: list[tuple[PathKey, list[Any]]] = []
        for key, value in block.items():
            leaves.extend(_zip_leaves(value, (*path, key)))
        return leaves
    if isinstance(block, list):
        return [(path, block)]
    return []


def _unzip(key: str, block: dict[str, Any], positions: Positions) -> list[dict[str, Any]]:
    leaves = _zip_leaves(block)
    lengths = {len(values) for _, values in leaves if len(values) != 1}
    if len(lengths) > 1:
        detail = ", ".join(f"{'.'.join(map(str, p))} has {len(v)}" for p, v in leaves if len(v) != 1)
        raise RecipeError(
            [positions.problem(f"zipped lists must have the same length: {detail}", (key,), prefer_key=True)]
        )
    if any(not values for _, values in leaves):
        empty = next(".".join(map(str, p)) for p, v in leaves if not v)
        raise RecipeError(
            [
                positions.problem(
                    f"zipped list {empty} is empty: a zip block needs one value per variant", (key,), prefer_key=True
                )
            ]
        )
    count = lengths.pop() if lengths else 1
    if count > MAX_VARIANTS:
        message = f"`{key}` makes {count} recipes, more than {MAX_VARIANTS}"
        raise RecipeError([positions.problem(message, (key,), prefer_key=True)])
    parts = []
    for i in range(count):
        part = copy.deepcopy(block)
        for path, values in leaves:
            _set(part, path, values[0] if len(values) == 1 else values[i])
        parts.append(part)
    return parts


def _set(data: dict[str, Any], path: PathKey, value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = copy.deepcopy(value)


def matches(name: str | None, pattern: str) -> bool:
    """Whether a variant called `name` is chosen by `--variant pattern` (a name, `name[i]`, a glob)."""
    if name is None:
        return False
    if name == pattern or name.split("[")[0] == pattern:
        return True
    return any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(name, pattern)


def select(variants: list[Variant], pattern: str | None, file: str | None = None) -> list[Variant]:
    """The variants whose name matches `pattern` (a name, `name[i]`, or a glob)."""
    if pattern is None:
        return variants
    chosen = [v for v in variants if matches(v.name, pattern)]
    if not chosen:
        raise RecipeError([no_match(pattern, [v.name for v in variants], len(variants), file)])
    return chosen


def no_match(pattern: str, some: list[str | None], total: int, file: str | None) -> Problem:
    shown = ", ".join(n or "<recipe>" for n in some[:SHOWN_NAMES])
    more = f", ... ({total} in all)" if total > len(some[:SHOWN_NAMES]) else ""
    return Problem(f"no variant matches {pattern!r}; variants: {shown}{more}", file=file)


# --------------------------------------------------------------------------- sweeps


def sweep_size(variant: Variant) -> int:
    """How many recipes the variant's sweep makes (1 without a sweep), before making any."""
    data = variant.data
    if not isinstance(data, dict) or data.get("sweep") is None:
        return 1
    mode, parameters = _sweep_parameters(data["sweep"], variant.positions)
    if mode == "zip":
        lengths = {len(v) for v in parameters.values()}
        if len(lengths) > 1:
            raise RecipeError([variant.positions.problem("zipped sweep lists must have the same length", ("sweep",))])
        return lengths.pop()
    return math.prod(len(v) for v in parameters.values())


def expand_sweep(variant: Variant, pattern: str | None = None) -> list[Variant]:
    """The sweep's recipes; with `pattern`, only those it names (the others are never built)."""
    data = variant.data
    if not isinstance(data, dict) or data.get("sweep") is None:
        return [variant] if pattern is None or matches(variant.name, pattern) else []
    count = sweep_size(variant)
    if pattern is None and count > MAX_VARIANTS:
        raise RecipeError([_too_many(variant, count, MAX_VARIANTS, "choose one with --variant")])
    if count > MAX_SEARCHED:
        raise RecipeError([_too_many(variant, count, MAX_SEARCHED, "even --variant cannot search it")])
    out: list[Variant] = []
    body = {k: v for k, v in data.items() if k != "sweep"}
    budget = _Growth(variant)
    for name, values in _combinations(variant, pattern):
        if pattern is not None and not matches(name, pattern):
            continue
        if len(out) == MAX_VARIANTS:
            raise RecipeError([_too_many(variant, count, MAX_VARIANTS, f"--variant {pattern!r} matches more")])
        budget.name = name
        out.append(Variant(name, substitute(body, values, budget), variant.positions))
    return out


class _Growth:
    """The characters a sweep's substitutions have made, refused past the budgets above."""

    def __init__(self, variant: Variant) -> None:
        self.positions = variant.positions
        self.name: str | None = None
        self.total = 0

    def spend(self, size: int, path: PathKey) -> None:
        self.total += size
        if size > MAX_SUBSTITUTED:
            self._refuse(f"the sweep's values make this string {size} characters, more than {MAX_SUBSTITUTED}", path)
        if self.total > MAX_SUBSTITUTED_TOTAL:
            message = f"the sweep's values make more than {MAX_SUBSTITUTED_TOTAL} characters of substituted strings"
            self._refuse(message, path)

    def _refuse(self, message: str, path: PathKey) -> None:
        raise RecipeError([self.positions.problem(message, path, variant=self.name)])


def variant_names(variant: Variant, limit: int) -> list[str | None]:
    """The first `limit` names of the recipes a variant makes, without making them."""
    data = variant.data
    if not isinstance(data, dict) or data.get("sweep") is None:
        return [variant.name]
    return [name for name, _ in itertools.islice(_combinations(variant), limit)]


def _combinations(variant: Variant, pattern: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every point of the sweep in order; with a plain `pattern`, a grid yields only the points whose
    label could be it (a million-point grid is not walked to find one point)."""
    mode, parameters = _sweep_parameters(variant.data["sweep"], variant.positions)
    names = list(parameters)
    if mode != "zip" and pattern is not None:
        parameters = _narrowed(variant.name, parameters, pattern)
    combos = zip(*parameters.values(), strict=True) if mode == "zip" else itertools.product(*parameters.values())
    for combo in combos:
        values = dict(zip(names, combo, strict=True))
        label = ",".join(f"{k}={v}" for k, v in values.items())
        yield (f"{variant.name}/{label}" if variant.name else label), values


def _narrowed(prefix: str | None, parameters: dict[str, list[Any]], pattern: str) -> dict[str, list[Any]]:
    """Each grid parameter's values that can appear in a label equal to `pattern`, in their order.

    Exact only: a glob, or a label with a `[` in it (which `matches` also compares before the
    bracket), keeps every value, and `matches` still decides each point."""
    labels = {k: [f"{k}={v}" for v in values] for k, values in parameters.items()}
    texts = [prefix or "", *(t for ts in labels.values() for t in ts)]
    if any(c in pattern for c in "*?[") or any("[" in t for t in texts):
        return parameters
    head = f"{prefix}/" if prefix else ""
    if not pattern.startswith(head):
        return {k: [] for k in parameters}
    rest = pattern[len(head) :]
    # the labels are joined with "," and a value may hold "," itself: keep every value whose
    # label occurs at a boundary of the pattern's rest
    return {
        k: [v for v, t in zip(values, labels[k], strict=True) if _at_boundary(rest, t)]
        for k, values in parameters.items()
    }


def _at_boundary(text: str, label: str) -> bool:
    start = 0
    while (i := text.find(label, start)) >= 0:
        end = i + len(label)
        if (i == 0 or text[i - 1] == ",") and (end == len(text) or text[end] == ","):
            return True
        start = i + 1
    return False


def _too_many(variant: Variant, count: int, limit: int, advice: str) -> Problem:
    where = f"sweep of {variant.name}" if variant.name else "sweep"
    return variant.positions.problem(
        f"the {where} makes {count} recipes, more than {limit}; {advice}", ("sweep",), prefer_key=True
    )


def _sweep_parameters(sweep: Any, positions: Positions) -> tuple[str, dict[str, list[Any]]]:
    if not isinstance(sweep, dict) or not sweep:
        raise RecipeError([positions.problem("`sweep` must map parameter names to lists of values", ("sweep",))])
    mode = "grid"
    parameters = sweep
    if set(sweep) <= {"mode", "parameters"} and isinstance(sweep.get("parameters"), dict):
        mode = sweep.get("mode", "grid")
        parameters = sweep["parameters"]
        if mode not in ("grid", "zip"):
            raise RecipeError([positions.problem(f"must be grid or zip, got {mode!r}", ("sweep", "mode"))])
    problems = [
        positions.problem("must be a non-empty list of values", ("sweep", key))
        for key, values in parameters.items()
        if not isinstance(values, list) or not values
    ]
    if problems:
        raise RecipeError(problems)
    prefix: PathKey = ("sweep", "parameters") if parameters is not sweep else ("sweep",)
    _refuse_repeats(mode, parameters, positions, prefix)
    return mode, parameters


def _refuse_repeats(mode: str, parameters: dict[str, list[Any]], positions: Positions, prefix: PathKey) -> None:
    """A value listed twice makes two recipes of one name and one job: never wanted, so refused.

    Values are compared as their names show them (`a=1`), so `1` and `"1"` repeat too:
    `--variant` could not tell their recipes apart.
    """
    if mode == "zip":
        first = next(iter(parameters))
        combos = zip(*parameters.values(), strict=False)
        points = [",".join(f"{k}={v}" for k, v in zip(parameters, combo, strict=True)) for combo in combos]
        repeat = _first_repeat(points)
        if repeat is not None:
            seen, again = repeat
            where = _line_of(positions, (*prefix, first, seen))
            message = f"sweep point {again} ({points[again]}) repeats point {seen}{where}: {_ONE_JOB}"
            raise RecipeError([positions.problem(message, (*prefix, first, again))])
        return
    for key, values in parameters.items():
        repeat = _first_repeat([str(v) for v in values])
        if repeat is not None:
            seen, again = repeat
            where = _line_of(positions, (*prefix, key, seen))
            message = f"{values[again]!r} is listed twice (also item {seen}{where}): {_ONE_JOB}"
            raise RecipeError([positions.problem(message, (*prefix, key, again))])


_ONE_JOB = "the two recipes would be one job"


def _first_repeat(labels: list[str]) -> tuple[int, int] | None:
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        if label in seen:
            return seen[label], i
        seen[label] = i
    return None


def _line_of(positions: Positions, path: PathKey, *, keys: bool = False) -> str:
    where = (positions.keys if keys else positions.values).get(path)
    return f", at {where[0]}:{where[1]}" if where else ""


def substitute(data: Any, values: dict[str, Any], budget: _Growth | None = None, path: PathKey = ()) -> Any:
    """Replace `{name}` of the sweep's parameters in every string; leave other braces alone."""
    if isinstance(data, dict):
        return {k: substitute(v, values, budget, (*path, k)) for k, v in data.items()}
    if isinstance(data, list):
        return [substitute(v, values, budget, (*path, i)) for i, v in enumerate(data)]
    if isinstance(data, str):
        for name, value in values.items():
            token = "{" + name + "}"
            if data == token:
                return copy.deepcopy(value)
            if token in data:
                text = str(value)
                if budget is not None:
                    budget.spend(len(data) + data.count(token) * (len(text) - len(token)), path)
                data = data.replace(token, text)
        return data
    return data
