"""A saved plan read back without pydantic (srtd/_record.py): the same plans load, with the
same bytes, and a bad one is refused with pydantic's words at the field's location.

The expected refusals below are what the pydantic models said for the same inputs; a
differential run over about 31,000 mutations of the golden plans (every field set to a
dozen wrong values, deleted, or given an extra key) found no difference before they went.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from srtd.unit import HttpProbe, Plan, Readiness, ShapeError, Unit, UnitKind

GOLDEN = Path(__file__).parent / "golden"
LIVENESS = GOLDEN / "recipes__features__liveness.yaml.json"  # its unit 0 has a liveness probe
COLLECTOR = GOLDEN / "recipes__features__collector.yaml.json"  # reporting; unit 2 counts workers


def _golden() -> list[Path]:
    return sorted(GOLDEN.glob("*.json"))


@pytest.mark.parametrize("path", _golden(), ids=lambda p: p.name)
def test_every_golden_plan_loads_back_to_its_exact_bytes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    for item in data if isinstance(data, list) else [data]:
        assert json.loads(Plan.load(item).dumps()) == item
    if not isinstance(data, list):
        assert Plan.loads(text).dumps() == text


def _mutated(path: Path, where: tuple[Any, ...], value: Any, *, delete: bool = False) -> str:
    doc = json.loads(path.read_text(encoding="utf-8"))
    node = doc
    for key in where[:-1]:
        node = node[key]
    if delete:
        del node[where[-1]]
    else:
        node[where[-1]] = value
    return json.dumps(doc)


REFUSALS = [
    (LIVENESS, ("local",), "x", "local: Input should be a valid boolean, unable to interpret input"),
    (LIVENESS, ("units", 0, "readiness", "probe"), None, "units.0.readiness.probe: Input should be an object"),
    (
        LIVENESS,
        ("units", 0, "readiness", "probe"),
        {"type": "nope"},
        "units.0.readiness.probe: Input tag 'nope' found using 'type' does not match any of the expected tags: "
        "'tcp', 'http', 'log', 'file', 'workers'",
    ),
    (
        LIVENESS,
        ("units", 0, "liveness", "probe"),
        {"type": "file"},
        "units.0.liveness.probe: Input tag 'file' found using 'type' does not match any of the expected tags: "
        "'tcp', 'http', 'log'",
    ),
    (
        LIVENESS,
        ("units", 0, "readiness", "interval_seconds"),
        0,
        "units.0.readiness.interval_seconds: Input should be greater than 0",
    ),
    (
        LIVENESS,
        ("units", 1, "readiness", "probe", "port"),
        70000,
        "units.1.readiness.probe.http.port: Input should be less than or equal to 65535",
    ),
    (LIVENESS, ("units", 0, "argv"), None, "units.0.argv: Field required"),
    (LIVENESS, ("units", 0, "restart", "zz_extra"), 1, "units.0.restart.zz_extra: Extra inputs are not permitted"),
    (LIVENESS, ("units", 0, "after"), {}, "units.0.after: Input should be a valid array"),
    (
        LIVENESS,
        ("units", 0, "critical"),
        2.0,
        "units.0.critical: Input should be a valid boolean, unable to interpret input",
    ),
    (LIVENESS, ("units", 0, "critical"), 1.5, "units.0.critical: Input should be a valid boolean"),
    (
        LIVENESS,
        ("units", 0, "tier"),
        1.5,
        "units.0.tier: Input should be a valid integer, got a number with a fractional part",
    ),
    (LIVENESS, ("units", 0, "env"), [], "units.0.env: Input should be an object"),
    (
        LIVENESS,
        ("units", 0, "kind"),
        "x",
        "units.0.kind: Input should be 'service', 'worker', 'frontend', 'benchmark', 'build' or 'host'",
    ),
    (
        LIVENESS,
        ("units", 0, "terminate_timeout"),
        -1,
        "units.0.terminate_timeout: Input should be greater than or equal to 0",
    ),
    (COLLECTOR, ("reporting", "metadata"), [], "reporting.metadata: Input should be an object"),
    (
        COLLECTOR,
        ("units", 2, "readiness", "probe", "prefill", 0, "where"),
        None,
        "units.2.readiness.probe.workers.prefill.0.where: Input should be an object",
    ),
]


@pytest.mark.parametrize(("path", "where", "value", "why"), REFUSALS, ids=[r[3].split(":")[0] for r in REFUSALS])
def test_a_bad_saved_plan_is_refused_at_the_field_with_pydantics_words(
    path: Path, where: tuple[Any, ...], value: Any, why: str
) -> None:
    delete = why.endswith("Field required")
    with pytest.raises(ShapeError) as err:
        Plan.loads(_mutated(path, where, value, delete=delete))
    assert str(err.value) == why


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "Invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ("[" * 70 + "]" * 70, "nested deeper than 64 levels"),
        ("[]", "Input should be an object"),
    ],
)
def test_what_is_not_a_plan_object_is_refused_without_a_location(text: str, why: str) -> None:
    with pytest.raises(ShapeError) as err:
        Plan.loads(text)
    assert (err.value.loc, str(err.value)) == ((), why)


def test_lax_numbers_and_booleans_load_as_pydantic_read_them() -> None:
    doc = json.loads(LIVENESS.read_text(encoding="utf-8"))
    doc["units"][0].update({"critical": "yes", "tier": "2", "terminate_timeout": True, "echo": 0})
    unit = Plan.loads(json.dumps(doc)).units[0]
    assert (unit.critical, unit.tier, unit.terminate_timeout, unit.echo) == (True, 2, 1.0, False)


def test_a_unit_built_in_code_keeps_tuples_floats_and_enums() -> None:
    probe = HttpProbe(node="n1", port=8000)
    unit = Unit(
        name="w",
        kind="worker",  # type: ignore[arg-type]
        phase="workers",
        nodes=["n1"],  # type: ignore[arg-type]
        argv=["prog"],  # type: ignore[arg-type]
        log="w.out",
        terminate_timeout=5,
        readiness={"probe": probe},  # type: ignore[arg-type]
    )
    assert (unit.kind, unit.nodes, unit.argv) == (UnitKind.WORKER, ("n1",), ("prog",))
    assert type(unit.terminate_timeout) is float
    assert unit.readiness == Readiness(probe=probe)
    # a copy is normalised as a new unit is
    assert replace(unit, nodes=["n2"]).nodes == ("n2",)  # type: ignore[arg-type]


def test_a_built_plan_with_a_value_no_recipe_refused_does_not_pass_the_check() -> None:
    plan = Plan.loads(LIVENESS.read_text(encoding="utf-8"))
    bad = replace(plan, units=(replace(plan.units[0], terminate_timeout=-1.0), *plan.units[1:]))
    with pytest.raises(ShapeError, match=r"^units\.0\.terminate_timeout: Input should be greater than or equal to 0$"):
        bad.checked()
    assert plan.checked() is plan


def test_records_compare_hash_and_show_field_by_field_as_dataclasses_do() -> None:
    a, b = HttpProbe(node="n1", port=8000), HttpProbe(node="n1", port=8000)
    assert a == b
    assert hash(a) == hash(b)
    assert a is not b
    assert a != replace(a, port=8001)
    assert a != replace(a, path="/ready")
    assert a.__eq__(Readiness(probe=a)) is NotImplemented  # another record type is never equal
    assert repr(a) == "HttpProbe(type='http', node='n1', port=8000, path='/health', status=200)"
    assert {a, b} == {a}
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):  # as a dataclass with a dict field
        hash(Plan.loads(LIVENESS.read_text(encoding="utf-8")))
