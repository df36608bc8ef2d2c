"""Frozen records for the plan's data types, checked by `srtd._shape` instead of pydantic.

`srtd run PLAN.json` reads a plan and supervises it; building pydantic's validators for the
plan's two dozen types cost it about 0.4 s of start and 17 MiB of memory for every job
(issue #36).  The plan's types are plain frozen dataclasses instead, each with a table of
`_shape` specs, one per field (`SPEC`):

- `Record.load(data)` checks a decoded JSON object field by field, in the order the fields
  are declared, and refuses it as pydantic did (the same words, the same location);
- constructing a record in srtd's own code only normalises (a list where a tuple is kept,
  an enum's value, a nested record given as a dict): the builder's values are typed and
  come from recipes that were checked already, and the finished plan is checked once as a
  whole (`check_record`), not every copy on the way;
- `as_json()` is the JSON form: fields in declared order, a field left out while it holds
  the value named in `OMIT` (so plans keep the bytes they had before the field existed).

A record's methods are shared, not generated: `@dataclass` compiles an `__init__`, a
`__setattr__` and a `__delattr__` for every frozen class (about 0.6 ms a class, 13 ms of every
job's start for the plan's types); `@record` makes a dataclass with none of them, and `Record`
holds one keyword `__init__` and the run-time frozenness for all (`FrozenInstanceError` on
assignment, as a frozen dataclass raises).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from typing import Any, ClassVar, TypeVar, dataclass_transform

from srtd import _shape as s
from srtd._value import describe_fields, equal_by_fields, hash_by_fields, repr_by_fields

R = TypeVar("R", bound="Record")


class _Factory:
    """A field's `default_factory`, told apart from a default value in `Record._defaults`."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class Record:
    """Base of the plan's frozen dataclasses, each declared with `@record`."""

    __slots__ = ()
    SPEC: ClassVar[dict[str, s.Spec]]  # every field's spec, in declared order
    OMIT: ClassVar[dict[str, Any]] = {}  # field -> the value with which it is left out of the JSON
    _required: ClassVar[frozenset[str]]
    _names: ClassVar[frozenset[str]]
    _defaults: ClassVar[tuple[tuple[str, Any], ...]]  # (field, default: MISSING or a _Factory or the value)
    _normalise: ClassVar[tuple[tuple[str, Callable[[Any], Any]], ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._normalise = ()  # set by `record` once the dataclass exists

    def __init__(self, **values: Any) -> None:
        # the keyword-only __init__ @dataclass would generate, with the same TypeErrors
        if not values.keys() <= self._names:
            unknown = next(name for name in values if name not in self._names)
            raise TypeError(f"{type(self).__qualname__}.__init__() got an unexpected keyword argument {unknown!r}")
        setter = object.__setattr__
        for name, default in self._defaults:
            value = values.get(name, default)
            if value.__class__ is _Factory:
                value = value.make()
            elif value is MISSING:
                wanted = f"missing 1 required keyword-only argument: {name!r}"
                raise TypeError(f"{type(self).__qualname__}.__init__() {wanted}")
            setter(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        for name, normalise in self._normalise:
            value = getattr(self, name)
            new = normalise(value)
            if new is not value:
                object.__setattr__(self, name, new)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    # copy and pickle set the slots back through these, as a frozen dataclass's do
    def __getstate__(self) -> list[Any]:
        return [getattr(self, name) for name in self.SPEC]

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(self.SPEC, state, strict=True):
            object.__setattr__(self, name, value)

    # Shared by every record instead of generated per class (`eq=False, repr=False` in each
    # `@dataclass`, srtd/_value.py): they compare, hash and show as the dataclass's would, the
    # fields in declared order (`record` describes them).
    __eq__ = equal_by_fields
    __hash__ = hash_by_fields
    __repr__ = repr_by_fields

    @classmethod
    def load(cls: type[R], data: Any, words: Mapping[str, str] = s.JSON_WORDS) -> R:
        """`data` checked against the record's specs (raises `ShapeError`)."""
        return RecordOf(cls).check(data, (), words)  # type: ignore[no-any-return]

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        omit = self.OMIT
        for name in self.SPEC:
            value = getattr(self, name)
            if name in omit and value == omit[name]:
                continue
            out[name] = _json_of(value)
        return out


def _json_of(value: Any) -> Any:
    if isinstance(value, Record):
        return value.as_json()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_json_of(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_of(v) for k, v in value.items()}
    return value


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def record(cls: type[R]) -> type[R]:
    """A record class: a slotted dataclass whose methods are `Record`'s (none generated), and
    which fields are required, what to normalise."""
    own = vars(cls)
    if any(name in own for name in ("__init__", "__eq__", "__repr__", "__setattr__", "__delattr__")):
        raise TypeError(f"{cls.__name__}: a record's methods are Record's (shared), not its own")
    cls = dataclass(cls, init=False, repr=False, eq=False, kw_only=True, slots=True)
    declared = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    if list(declared) != list(cls.SPEC):
        raise TypeError(f"{cls.__name__}: SPEC must name every field in declared order")
    cls._defaults = tuple(
        (name, _Factory(f.default_factory) if f.default_factory is not MISSING else f.default)
        for name, f in declared.items()
    )
    cls._names = frozenset(declared)
    cls._required = frozenset(name for name, default in cls._defaults if default is MISSING)
    cls._normalise = tuple((name, n) for name, spec in cls.SPEC.items() if (n := _normaliser(spec)) is not None)
    describe_fields(cls)
    return cls


def _normaliser(spec: s.Spec) -> Callable[[Any], Any] | None:
    """What turns a value built in code into the kept form, or None when it is kept as given."""
    if isinstance(spec, s.Nullable):
        inner = _normaliser(spec.inner)
        if inner is None:
            return None
        return lambda v: v if v is None else inner(v)
    if isinstance(spec, TupleOf):
        item = _normaliser(spec.item)
        if item is None:
            return lambda v: v if type(v) is tuple else tuple(v)
        return lambda v: tuple(item(x) for x in v)
    if isinstance(spec, s.Num):  # a float field given an int keeps a float (`300.0` in the JSON)
        return lambda v: float(v) if type(v) is int else v
    if isinstance(spec, s.Int):
        return lambda v: int(v) if type(v) is float and v.is_integer() else v
    if isinstance(spec, EnumOf):
        kind = spec.kind
        return lambda v: v if type(v) is kind else kind(v)
    if isinstance(spec, RecordOf):
        cls = spec.cls
        return lambda v: cls(**v) if isinstance(v, dict) else v
    if isinstance(spec, s.DictOf):
        value = _normaliser(spec.value)
        if value is None:
            return None
        return lambda v: {k: value(x) for k, x in v.items()}
    return None


def check_record(value: Record) -> None:
    """Check a record built in code as a loaded one is checked (raises `ShapeError`)."""
    RecordOf(type(value)).check(value.as_json(), (), s.PYTHON_WORDS)


# ------------------------------------------------------------------ the specs records add


class TupleOf(s.ListOf):
    """A JSON array kept as a tuple."""

    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        return tuple(super().check(value, loc, words))


class EnumOf(s.OneOf):
    """A string enum: its values checked, its member kept."""

    def __init__(self, kind: type[enum.Enum]) -> None:
        super().__init__(tuple(m.value for m in kind))
        self.kind = kind

    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        return self.kind(super().check(value, loc, words))


class RecordOf(s.Spec):
    """An object checked field by field in declared order, then made the record."""

    def __init__(self, cls: type[Record]) -> None:
        self.cls = cls

    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        if isinstance(value, self.cls):
            return value
        if not isinstance(value, dict):
            raise s.ShapeError(loc, f"Input should be {words['object']}")
        out: dict[str, Any] = {}
        for name, spec in self.cls.SPEC.items():
            if name in value:
                out[name] = spec.check(value[name], (*loc, name), words)
            elif name in self.cls._required:
                raise s.ShapeError((*loc, name), "Field required")
        for name in value:
            if name not in self.cls.SPEC:
                raise s.ShapeError((*loc, name), "Extra inputs are not permitted")
        return self.cls(**out)


class Tagged(s.Spec):
    """One of some records, chosen by the value of their `key` field (pydantic's discriminator)."""

    def __init__(self, key: str, choices: Mapping[str, type[Record]]) -> None:
        self.key, self.choices = key, {tag: RecordOf(cls) for tag, cls in choices.items()}

    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        if isinstance(value, Record) and any(isinstance(value, c.cls) for c in self.choices.values()):
            return value
        if not isinstance(value, dict):
            raise s.ShapeError(loc, f"Input should be {words['object']}")
        if self.key not in value:
            raise s.ShapeError(loc, f"Unable to extract tag using discriminator '{self.key}'")
        tag = value[self.key]
        choice = self.choices.get(tag) if isinstance(tag, str) else None
        if choice is None:
            expected = ", ".join(f"'{t}'" for t in self.choices)
            raise s.ShapeError(
                loc, f"Input tag '{tag}' found using '{self.key}' does not match any of the expected tags: {expected}"
            )
        return choice.check(value, (*loc, tag), words)


class Literal(s.Spec):
    """Exactly one string (a tagged record's tag)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        if value != self.value or not isinstance(value, str):
            raise s.ShapeError(loc, f"Input should be '{self.value}'")
        return value


class Either(s.Spec):
    """The first of some specs that takes the value; refused as the first refused it,
    located under its name (`str`, `list[str]`), as pydantic locates a union's members."""

    def __init__(self, members: Mapping[str, s.Spec]) -> None:
        self.members = members

    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        first: s.ShapeError | None = None
        for name, spec in self.members.items():
            try:
                return spec.check(value, (*loc, name), words)
            except s.ShapeError as e:
                first = first or e
        assert first is not None
        raise first


# ------------------------------------------------------------------ pydantic's lax scalars
# A saved plan was read by pydantic in its lax mode: `1` for true, `true` for 1, "5" for 5.
# These three take what it took, so a plan that loaded before loads the same.

_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class LaxBool(s.Spec):
    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and (word := value.lower()) in _TRUE | _FALSE:
            return word in _TRUE
        if isinstance(value, str | int) or (isinstance(value, float) and value.is_integer()):
            raise s.ShapeError(loc, "Input should be a valid boolean, unable to interpret input")
        raise s.ShapeError(loc, "Input should be a valid boolean")


class LaxInt(s.Int):
    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        if isinstance(value, bool):
            value = int(value)
        elif isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise s.ShapeError(
                    loc, "Input should be a valid integer, unable to parse string as an integer"
                ) from None
        return super().check(value, loc, words)


class LaxNum(s.Num):
    def check(self, value: Any, loc: s.Loc, words: Mapping[str, str]) -> Any:
        if isinstance(value, bool):
            value = float(value)
        elif isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise s.ShapeError(loc, "Input should be a valid number, unable to parse string as a number") from None
        return super().check(value, loc, words)
