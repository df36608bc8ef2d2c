"""The shape of decoded JSON, checked without pydantic: for the commands that must answer at once.

`srtd ps`, `srtd attach` and the journal's readers check what they read (a journal line, a
message from a socket) before they fold it, but they must not pay for pydantic: building its
models costs more than the 120 ms such a command may take in all (docs/performance.md).  The
shapes they read are few and flat, so they are declared here as a handful of specs, and a
refusal is worded as pydantic words it (`Input should be a valid string`, `Field required`),
so an error line reads the same wherever a shape is checked.

`check(spec, value)` returns the value with numbers made what the spec says (an integral float
for an `Int`, an int for a `Num`), or raises `ShapeError` with where (`loc`) and what (`msg`).
`words=JSON_WORDS` names a wrong container as JSON does ("a valid array", "an object"), for a
line decoded from JSON; the default names it as Python does ("a valid list", "a valid
dictionary"), for a message already decoded.

A library that decodes typed JSON (msgspec) does this too; it words its errors differently,
and srtd's messages are a contract, so this stays until that is decided (issue #36's note).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

Loc = tuple[str | int, ...]


class ShapeError(ValueError):
    """A value of the wrong shape: where (`loc`, empty for the whole value) and what."""

    def __init__(self, loc: Loc, msg: str) -> None:
        super().__init__(f"{'.'.join(map(str, loc))}: {msg}" if loc else msg)
        self.loc = loc
        self.msg = msg


PYTHON_WORDS = {"list": "a valid list", "dict": "a valid dictionary", "object": "a valid dictionary"}
JSON_WORDS = {"list": "a valid array", "dict": "an object", "object": "an object"}


class Spec:
    """One kind of value: plain classes, not dataclasses, whose creation costs a command's start."""

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        raise NotImplementedError


class AnyValue(Spec):
    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        return value


class Str(Spec):
    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if not isinstance(value, str):
            raise ShapeError(loc, "Input should be a valid string")
        return value


class Bool(Spec):
    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if not isinstance(value, bool):
            raise ShapeError(loc, "Input should be a valid boolean")
        return value


def _bounded(value: float, loc: Loc, ge: float | None, le: float | None) -> None:
    if ge is not None and value < ge:
        raise ShapeError(loc, f"Input should be greater than or equal to {ge}")
    if le is not None and value > le:
        raise ShapeError(loc, f"Input should be less than or equal to {le}")


class Int(Spec):
    def __init__(self, ge: int | None = None, le: int | None = None) -> None:
        self.ge, self.le = ge, le

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, float):
            raise ShapeError(loc, "Input should be a valid integer, got a number with a fractional part")
        if not isinstance(value, int) or isinstance(value, bool):
            raise ShapeError(loc, "Input should be a valid integer")
        _bounded(value, loc, self.ge, self.le)
        return value


class Num(Spec):
    """A finite number (JSON's NaN and Infinity are refused), as a float."""

    def __init__(self, ge: float | None = None, gt: float | None = None) -> None:
        self.ge, self.gt = ge, gt

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ShapeError(loc, "Input should be a valid number")
        if not math.isfinite(value):
            raise ShapeError(loc, "Input should be a finite number")
        _bounded(value, loc, self.ge, None)
        if self.gt is not None and value <= self.gt:
            raise ShapeError(loc, f"Input should be greater than {self.gt}")
        return float(value)


class OneOf(Spec):
    """One of some strings (an enum's values)."""

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values = values

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if value not in self.values or not isinstance(value, str):
            *most, last = (repr(v) for v in self.values)
            raise ShapeError(loc, f"Input should be {', '.join(most)} or {last}")
        return value


class Nullable(Spec):
    def __init__(self, inner: Spec) -> None:
        self.inner = inner

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        return None if value is None else self.inner.check(value, loc, words)


class ListOf(Spec):
    def __init__(self, item: Spec, max_length: int | None = None) -> None:
        self.item, self.max_length = item, max_length

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if not isinstance(value, list):
            raise ShapeError(loc, f"Input should be {words['list']}")
        if self.max_length is not None and len(value) > self.max_length:
            raise ShapeError(loc, f"List should have at most {self.max_length} items after validation")
        return [self.item.check(v, (*loc, i), words) for i, v in enumerate(value)]


class DictOf(Spec):
    def __init__(self, value: Spec) -> None:
        self.value = value

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if not isinstance(value, dict):
            raise ShapeError(loc, f"Input should be {words['dict']}")
        return {k: self.value.check(v, (*loc, k), words) for k, v in value.items()}


class Obj(Spec):
    """An object of named fields: `required` must be there, `optional` may be; others are
    refused (`extra="forbid"`), kept (`"allow"`) or dropped (`"ignore"`).  `then` checks the
    whole once its fields hold (a `ValueError` from it is the object's)."""

    def __init__(
        self,
        required: Mapping[str, Spec] | None = None,
        optional: Mapping[str, Spec] | None = None,
        extra: str = "forbid",
        then: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.required, self.optional = required or {}, optional or {}
        self.extra, self.then = extra, then

    def check(self, value: Any, loc: Loc, words: Mapping[str, str]) -> Any:
        if not isinstance(value, dict):
            raise ShapeError(loc, f"Input should be {words['object']}")
        out: dict[str, Any] = {}
        for name, spec in self.required.items():
            if name not in value:
                raise ShapeError((*loc, name), "Field required")
            out[name] = spec.check(value[name], (*loc, name), words)
        for name, item in value.items():
            optional = self.optional.get(name)
            if optional is not None:
                out[name] = optional.check(item, (*loc, name), words)
            elif name in self.required:
                continue
            elif self.extra == "forbid":
                raise ShapeError((*loc, name), "Extra inputs are not permitted")
            elif self.extra == "allow":
                out[name] = item
        if self.then is not None:
            try:
                self.then(out)
            except ShapeError:
                raise
            except ValueError as e:
                raise ShapeError(loc, str(e)) from None
        return out


def check(spec: Spec, value: Any, words: Mapping[str, str] = PYTHON_WORDS) -> Any:
    return spec.check(value, (), words)


def nullable(specs: Mapping[str, Spec]) -> dict[str, Spec]:
    """The same fields, each of which may also be null."""
    return {name: Nullable(spec) for name, spec in specs.items()}


def strings(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)
