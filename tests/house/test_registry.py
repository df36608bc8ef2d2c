"""The registry tables: one row per name, a name registered twice is refused."""

from __future__ import annotations

import pytest

from srtd._registry import Registry, Row
from srtd.engines import Engine, engine_row, register_engine
from srtd.engines._base import ENGINES
from srtd.recipe import SGLangEngine


def test_a_row_is_registered_once_under_its_name() -> None:
    table: Registry[Row] = Registry("widget")

    @table.register("b")
    class B(Row):
        pass

    @table.register("a")
    class A(Row):
        pass

    assert (A.name, B.name) == ("a", "b")
    assert table.names() == ["a", "b"]  # sorted
    assert [type(row) for row in table.rows()] == [B, A]  # in registration order
    assert table.get("c") is None
    with pytest.raises(ValueError, match=r"^widget 'a' is registered twice$"):
        table.register("a")(type("Again", (Row,), {}))
    assert type(table.get("a")) is A


def test_an_engine_registered_twice_is_refused_and_the_first_row_stays() -> None:
    before = ENGINES.get("sglang")
    with pytest.raises(ValueError, match=r"^engine 'sglang' is registered twice$"):
        register_engine(SGLangEngine)(type("SGLangAgain", (Engine,), {}))
    assert ENGINES.get("sglang") is before
    assert engine_row(SGLangEngine()) is before
