"""`@value_class` (srtd/_value.py) answers as `@dataclass` does, with one generated method.

Each shape of class is declared twice, once with `@dataclass` and once with `@value_class`,
and the two are held to the same equality, hash, repr and hashability; then the house rule
that keeps the start light: srtd's classes are declared with `@value_class` (or are the
plan's records), never with a bare `@dataclass`.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from srtd._value import equal_by_fields, hash_by_fields, repr_by_fields, value_class

SRTD = Path(__file__).resolve().parents[2] / "srtd"


def twins(**options: Any) -> tuple[type[Any], type[Any]]:
    """One class body made both ways: (dataclass, value class)."""

    def body() -> type[Any]:
        class Point:
            x: int
            y: str = "a"
            hidden: tuple[int, ...] = field(default=(), repr=False)
            ignored: float = field(default=0.0, compare=False)

        return Point

    frozen, eq = options.get("frozen", True), options.get("eq", True)
    slots, kw_only = options.get("slots", False), options.get("kw_only", False)
    made = dataclass(frozen=frozen, eq=eq, slots=slots, kw_only=kw_only)(body())
    ours = value_class(frozen=frozen, eq=eq, slots=slots, kw_only=kw_only)(body())
    return made, ours


SHAPES = [
    {},
    {"frozen": False},
    {"eq": False},
    {"frozen": False, "eq": False},
    {"slots": True},
    {"slots": True, "kw_only": True},
]


def _same(made: type[Any], ours: type[Any], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    return made(*args, **kwargs), ours(*args, **kwargs)


@pytest.mark.parametrize("options", SHAPES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "frozen")
def test_a_value_class_answers_as_the_dataclass(options: dict[str, Any]) -> None:
    made, ours = twins(**options)
    kw = {"x": 1, "y": "b", "hidden": (1,), "ignored": 2.5}
    a_made, a_ours = _same(made, ours, **kw)
    b_made, b_ours = _same(made, ours, **{**kw, "hidden": (9,), "ignored": 7.0})  # differs in a compared field only
    c_made, c_ours = _same(made, ours, **{**kw, "ignored": 9.0})  # differs in an uncompared field only

    assert (
        repr(a_ours)
        == repr(a_made).replace(made.__qualname__, ours.__qualname__)
        == ("twins.<locals>.body.<locals>.Point(x=1, y='b', ignored=2.5)")
    )
    assert (a_ours == b_ours) is (a_made == b_made) is False
    assert (a_ours == c_ours) is (a_made == c_made) is options.get("eq", True)
    same_ours, same_made = a_ours, a_made
    assert a_ours == same_ours
    assert a_made == same_made
    assert a_ours.__eq__(object()) is NotImplemented or not options.get("eq", True)
    assert (made.__hash__ is None) is (ours.__hash__ is None)
    if made.__hash__ is not None and options.get("eq", True):
        assert hash(a_ours) == hash(c_ours)  # the uncompared field is not hashed
    assert [f.name for f in dataclasses.fields(ours)] == ["x", "y", "hidden", "ignored"]
    assert dataclasses.replace(a_ours, x=5).x == 5
    assert dataclasses.asdict(a_ours) == dataclasses.asdict(a_made)
    assert ours.__match_args__ == made.__match_args__
    assert hasattr(a_ours, "__dict__") is (not options.get("slots", False))


def test_only_the_init_is_generated_and_the_rest_is_shared() -> None:
    _, ours = twins()
    assert ours.__eq__ is equal_by_fields
    assert ours.__hash__ is hash_by_fields
    assert ours.__repr__ is repr_by_fields
    assert "__setattr__" not in vars(ours)  # frozen is mypy's
    assert "__delattr__" not in vars(ours)
    _, mutable = twins(frozen=False)
    assert mutable.__hash__ is None  # as a mutable dataclass with equality: unhashable
    _, identity = twins(eq=False)
    assert identity.__eq__ is object.__eq__
    assert identity.__hash__ is object.__hash__


def test_what_a_class_defines_itself_is_kept() -> None:
    @value_class
    class Own:  # noqa: PLW1641  # no __hash__ of its own: value_class gives it one, as dataclass
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

    @value_class
    class Hashed:
        x: int

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own"
    assert Own(1) == Own(2)
    assert Own.__hash__ is hash_by_fields  # frozen with an __eq__ of its own: hashed by its fields, as dataclass does
    assert hash(Hashed(1)) == 7


def test_a_subclass_compares_its_base_fields_too() -> None:
    @value_class
    class Base:
        a: int

    @value_class
    class Child(Base):
        b: int = 0

    assert Child(1, 2) != Child(2, 2)
    assert Child(1, 2) == Child(1, 2)
    assert Child(1, 2) != Base(1)  # another class: not equal, as dataclasses
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")


@given(
    st.integers(),
    st.text(),
    st.lists(st.integers()).map(tuple),
    st.floats(allow_nan=False),
    st.integers(),
    st.text(),
)
def test_equality_and_hash_match_the_dataclass_for_any_values(
    x: int, y: str, hidden: tuple[int, ...], ignored: float, x2: int, y2: str
) -> None:
    made, ours = twins()
    one_made, one_ours = _same(made, ours, x, y, hidden, ignored)
    two_made, two_ours = _same(made, ours, x2, y2, (), 0.0)
    assert (one_ours == two_ours) is (one_made == two_made)
    if one_made == two_made:
        assert hash(one_ours) == hash(two_ours)
    assert repr(one_ours).split("Point", 1)[1] == repr(one_made).split("Point", 1)[1]


def _bare_dataclasses(path: Path) -> list[str]:
    """Classes of `path` decorated `@dataclass` that are not the plan's records (`@record`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.ClassDef):
            continue
        names = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
        if "dataclass" in names and "record" not in names:
            found.append(f"{path.relative_to(SRTD.parent)}:{node.lineno}: {node.name}")
    return found


def test_srtd_declares_its_classes_with_value_class() -> None:
    """A bare `@dataclass` compiles six methods at import where `@value_class` compiles one
    (about 0.3 ms a class on every command's and every job's start).  The toy programs are
    standalone (they import nothing of srtd's) and keep the standard decorator."""
    bare = [hit for path in sorted(SRTD.rglob("*.py")) if "toy" not in path.parts for hit in _bare_dataclasses(path)]
    assert bare == []
