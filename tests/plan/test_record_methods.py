"""The plan's records share their methods (srtd/_record.py): one keyword `__init__` and the
run-time frozenness live on `Record`, and `@record` generates none; a record still builds,
refuses, copies and freezes as the frozen dataclass it was."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from srtd._record import Record, record
from srtd.unit import Edge, Plan, Restart, RestartMode, Unit


def _unit(**over: object) -> Unit:
    fields: dict[str, object] = {
        "name": "w",
        "kind": "worker",
        "phase": "p",
        "nodes": ["n0"],
        "log": "w.log",
        "argv": ["x"],
    }
    return Unit(**{**fields, **over})  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [Unit, Plan, Edge, Restart])
def test_a_record_generates_no_methods_of_its_own(kind: type[Record]) -> None:
    own = vars(kind)
    for name in ("__init__", "__setattr__", "__delattr__", "__eq__", "__hash__", "__repr__"):
        assert name not in own, name
    assert kind.__init__ is Record.__init__
    assert kind.__setattr__ is Record.__setattr__


def test_a_record_is_frozen_at_run_time() -> None:
    unit = _unit()
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"):
        unit.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'argv'"):
        del unit.argv  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        unit.unknown = 1  # type: ignore[attr-defined]
    assert unit.name == "w"


def test_defaults_factories_and_normalising_as_the_dataclass() -> None:
    one, two = _unit(), _unit()
    assert one.env == {}
    assert one.env is not two.env  # a default_factory makes one per record
    assert one.restart == Restart()
    assert _unit(argv=["a", "b"]).argv == ("a", "b")  # a list kept as a tuple
    assert Restart(backoff_seconds=1).backoff_seconds == 1.0
    assert type(Restart(backoff_seconds=1).backoff_seconds) is float
    assert Restart(policy="always").policy is RestartMode.ALWAYS  # an enum's value kept as its member


def test_wrong_keywords_are_refused_as_the_dataclass_refuses_them() -> None:
    with pytest.raises(TypeError, match=r"^Edge\.__init__\(\) missing 1 required keyword-only argument: 'unit'$"):
        Edge()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^Edge\.__init__\(\) got an unexpected keyword argument 'bogus'$"):
        Edge(unit="a", bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Edge("a")  # type: ignore[misc]  # keyword-only


def test_copy_pickle_and_replace_keep_the_record() -> None:
    unit = _unit(env={"A": "1"}, restart=Restart(policy=RestartMode.ON_FAILURE))
    for twin in (copy.copy(unit), copy.deepcopy(unit), pickle.loads(pickle.dumps(unit))):
        assert twin == unit
        assert twin is not unit
        assert twin.as_json() == unit.as_json()
    changed = dataclasses.replace(unit, name="other")
    assert changed.name == "other"
    assert changed.env == unit.env
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.deepcopy(unit).name = "x"  # type: ignore[misc]


def test_a_class_with_methods_of_its_own_is_refused() -> None:
    with pytest.raises(TypeError, match="a record's methods are Record's"):

        @record
        class Own(Record):  # noqa: PLW1641
            SPEC = {}

            def __eq__(self, other: object) -> bool:
                return True
