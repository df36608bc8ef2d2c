"""`reporting.publishers` in the plan, and the values the loader refuses (one line each, with its place)."""

from __future__ import annotations

import json

import pytest

from tests.plan._util import load_problems, plan

BODY = """\
engine: toy
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: toy-router, enable_multiple_frontends: false}
reporting:
  publishers:
"""


def test_publishers_are_plan_data_in_order_with_their_logs() -> None:
    p = plan(BODY + "    - {name: a, command: [pub, --x]}\n    - {name: b, command: [other], timeout_seconds: 5}\n")
    assert [(x.name, x.argv, x.timeout_seconds, x.log) for x in p.publishers] == [
        ("a", ("pub", "--x"), 60.0, "publish_a.out"),
        ("b", ("other",), 5.0, "publish_b.out"),
    ]
    assert json.loads(p.dumps())["publishers"][1] == {
        "name": "b",
        "argv": ["other"],
        "timeout_seconds": 5.0,
        "log": "publish_b.out",
    }


def test_a_plan_without_publishers_keeps_its_json() -> None:
    p = plan(BODY.removesuffix("reporting:\n  publishers:\n"))
    assert "publishers" not in json.loads(p.dumps())


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ("    - {name: a, command: []}\n", (12, "reporting.publishers.0.command", "must not be empty")),
        ("    - {name: a, command: [' ']}\n", (12, "reporting.publishers.0.command.0", "must not be blank")),
        (
            "    - {name: a, command: [x], timeout_seconds: 0}\n",
            (12, "reporting.publishers.0.timeout_seconds", "must be more than 0, got 0"),
        ),
        (
            "    - {name: a, command: [x]}\n    - {name: a, command: [y]}\n",
            (13, "reporting.publishers.1.name", "'a' is used by an earlier publisher"),
        ),
        ("    - {name: a/b, command: [x]}\n", (12, "reporting.publishers.0.name", None)),
        ("    - {name: a, command: x y}\n", (12, "reporting.publishers.0.command", None)),
    ],
)
def test_bad_publishers_are_one_line_with_their_place(entries: str, problem: tuple[int, str, str | None]) -> None:
    [(line, path, message)] = load_problems(BODY + entries)
    assert (line, path) == problem[:2]
    if problem[2] is not None:
        assert message == problem[2]
