"""`@value_class`: srtd's dataclasses, with one generated method where `@dataclass` makes six.

`dataclasses` writes each method it adds as source text and compiles it (`exec`) when the
class is made: about 0.1 ms a method here, and a frozen dataclass with equality and a repr
gets six (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`).
srtd's supervisor made some fifty such classes before its first launch, about 10 ms of every
job's start (issue #36).  A `@value_class` class is a dataclass whose `__init__` only is generated:

- `__eq__`, `__hash__` and `__repr__` are shared functions, driven by the class's fields
  (their `compare` and `repr` flags): the same answers the generated ones give, and the
  same rules for which a class gets (a mutable class with equality is unhashable; a method
  the class defines itself is kept);
- frozen is the type checker's (`dataclass_transform`, frozen by default): assigning to a
  field of a frozen `@value_class` is a mypy error, not a run-time one.  The plan's records stay
  frozen at run time (srtd/_record.py): they are srtd's public data model.

`fields`, `replace`, `asdict` and `__match_args__` work as on any dataclass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


def _nothing(_: object) -> tuple[()]:
    return ()


def _getter(names: tuple[str, ...]) -> Callable[[Any], Any]:
    """The values of `names` on an instance (one value alone for one name: compared and hashed alike)."""
    return attrgetter(*names) if names else _nothing


def equal_by_fields(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self.__class__.__value_key__
    return key(self) == key(other)


def hash_by_fields(self: Any) -> int:
    return hash(self.__class__.__value_key__(self))


def repr_by_fields(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__class__.__value_shown__)
    return f"{self.__class__.__qualname__}({shown})"


def describe_fields(cls: Any) -> None:
    """What the shared methods read on a dataclass: the fields its repr shows, and the key
    (its compared fields' values) it is compared and hashed by."""
    cls.__value_shown__ = tuple(f.name for f in fields(cls) if f.repr)
    cls.__value_key__ = staticmethod(_getter(tuple(f.name for f in fields(cls) if f.compare)))


def share_methods(cls: Any, *, eq: bool = True, frozen: bool = True) -> None:
    """Give a dataclass made with `eq=False, repr=False` the methods `@dataclass` would have
    generated for `eq` and `frozen`, shared; those the class defines itself are kept."""
    own = vars(cls)
    describe_fields(cls)
    if "__repr__" not in own:
        cls.__repr__ = repr_by_fields
    if not eq:
        return
    defines_eq = "__eq__" in own
    if not defines_eq:
        cls.__eq__ = equal_by_fields
    # a class body with __eq__ and no __hash__ holds __hash__ = None: not a hash of its own
    explicit_hash = own.get("__hash__") is not None or ("__hash__" in own and not defines_eq)
    if not explicit_hash:
        cls.__hash__ = hash_by_fields if frozen else None


@overload
def value_class(cls: type[T], /) -> type[T]: ...


@overload
def value_class(
    *, frozen: bool = True, eq: bool = True, kw_only: bool = False, slots: bool = False
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_class(
    cls: type[T] | None = None,
    /,
    *,
    frozen: bool = True,
    eq: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """A dataclass (`frozen`, `eq`, `kw_only`, `slots` as `@dataclass` takes them) with only
    its `__init__` generated."""

    def make(c: type[T]) -> type[T]:
        made = dataclass(c, eq=False, repr=False, kw_only=kw_only, slots=slots)
        share_methods(made, eq=eq, frozen=frozen)
        return made

    return make if cls is None else make(cls)
