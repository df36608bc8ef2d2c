"""Property tests: whatever recipe or journal arrives, srtd answers within its contract.

Valid recipes (tests/recipe/test_fuzz.py's seeds) and a real journal are mutated with
hostile values (path tricks, control characters, NUL, absurd and non-finite numbers,
alias bombs, deep nesting, garbage lines).  Every command must end with a documented
exit code (never 70), print no traceback, give a location with each exit-2 line, and
write nothing outside the log directory.  Most examples run in this process; a sample
runs in a subprocess under memory and CPU rlimits with a timeout, proving no hang and
no blow-up.  Profiles (tests/conftest.py): the default run, or --hypothesis-profile=thorough.
"""

from __future__ import annotations

import copy
import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tests.hostile.helpers import DOCUMENTED, EXAMPLE_JOURNAL, Result, bounded, srtd, tree
from tests.recipe.test_fuzz import SEEDS

NODES = "n[1-8]"
# An exit-2 line names its file (and, for a recipe key, line and column).
LOCATED = re.compile(r"^(srtd: )?(\S+\.(yaml|json|jsonl)|--[a-z-]+|\$?SRTD_[A-Z_]+|SRTD_\S+)(:\d+(:\d+)?)?[ :]")

HOSTILE_STRINGS = st.sampled_from(
    [
        "../../../../tmp/escaped",
        "a/b",
        "..",
        "",
        "x\ty",
        "x\ny",
        "x\x00y",
        "\x1b[31m",
        "1BAD",
        "A=B",
        "$(rm -rf /)",
        "{node}",
        "{unknown}",
        "x" * 5000,
        "forever",
        "99:99:99",
    ]
)
HOSTILE_NUMBERS = st.sampled_from([0, -1, -8, 2**63, 10**30, 1e308, float("inf"), float("nan"), 0.5, True])
HOSTILE = st.one_of(
    HOSTILE_STRINGS,
    HOSTILE_NUMBERS,
    st.lists(HOSTILE_STRINGS, max_size=3),
    st.dictionaries(HOSTILE_STRINGS, HOSTILE_STRINGS, max_size=2),
)


def _paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += _paths(value, (*path, i))
    return out


@st.composite
def mutated_recipes(draw: st.DrawFn) -> dict[str, Any]:
    recipe = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(recipe)[1:]))
        parent = recipe
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) and draw(st.booleans()) and isinstance(path[-1], str):
            # a hostile key beside the value, or in its place
            parent[draw(HOSTILE_STRINGS) or "k"] = parent.pop(path[-1])
        else:
            parent[path[-1]] = draw(HOSTILE)
    return recipe


def dump(data: Any, *, bomb: int = 0) -> str:
    buffer = io.StringIO()
    yaml = YAML()
    yaml.width = 4096
    yaml.dump(data, buffer)
    text = buffer.getvalue()
    if bomb:  # chained aliases appended: each level 9 copies of the one before
        text += "anchors:\n  l0: &l0 [x]\n"
        text += "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, bomb + 1))
    return text


def check(result: Result, root: Path, before: set[Path], allowed: set[Path] = frozenset()) -> None:  # type: ignore[assignment]
    assert result.code in DOCUMENTED, (result.code, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert "internal error" not in result.stderr
    if result.code == 2:
        errors = [line for line in result.stderr.splitlines() if "warning:" not in line]
        assert errors, result.stderr
        for line in errors:
            assert LOCATED.match(line), line
    assert tree(root) - before <= allowed, tree(root) - before


@given(recipe=mutated_recipes(), bomb=st.sampled_from([0, 0, 0, 3, 9]))
def test_any_mutated_recipe_validates_and_plans_within_the_contract(recipe: dict[str, Any], bomb: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        file = root / "r.yaml"
        file.write_text(dump(recipe, bomb=bomb), encoding="utf-8")
        before = tree(root)
        check(srtd("validate", str(file)), root, before)
        result = srtd("plan", str(file), "--nodes", NODES, "--json", "--log-dir", str(root / "logs"))
        check(result, root, before)
        if result.code == 0 and result.stdout.startswith("{"):
            plan = json.loads(result.stdout)
            for unit in plan["units"]:  # every log is a file of the log directory
                assert (root / "logs" / unit["log"]).resolve().is_relative_to(root / "logs")


def _journal_lines() -> list[str]:
    return EXAMPLE_JOURNAL.read_text(encoding="utf-8").splitlines(keepends=True)


GARBAGE = st.one_of(
    st.sampled_from(
        [
            "{garbage\n",
            "\n",
            "[]\n",
            "null\n",
            '{"seq": 1}\n',
            '{"seq": -1, "ts": 1, "state": "x"}\n',
            '{"seq": 99, "ts": NaN, "state": "x"}\n',
            '{"seq": 99, "ts": 1e999, "state": "x"}\n',
            '{"seq": 99, "ts": 1, "state": "x", "exit_code": 99999999999999999999}\n',
            '{"seq": 99, "ts": 1, "state": "x", "detail": ' + "[" * 5000 + "]" * 5000 + "}\n",
            "\xff\xfe\n",
        ]
    ),
    st.text(max_size=200).map(lambda t: t.replace("\n", "") + "\n"),
)


@st.composite
def mutated_journals(draw: st.DrawFn) -> str:
    lines = _journal_lines()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines)))
        action = draw(st.sampled_from(["insert", "replace", "truncate", "number"]))
        if action == "insert" or not lines:
            lines.insert(at, draw(GARBAGE))
        elif action == "replace":
            lines[min(at, len(lines) - 1)] = draw(GARBAGE)
        elif action == "truncate":
            line = lines[min(at, len(lines) - 1)]
            lines[min(at, len(lines) - 1)] = line[: draw(st.integers(0, len(line)))]
        else:
            i = min(at, len(lines) - 1)
            value = draw(st.sampled_from(["NaN", "-Infinity", "-5", "1e400", "4294967296000", '"x"', "null"]))
            lines[i] = re.sub(r'("(ts|seq|exit_code|pid|attempt)":)[^,}]+', rf"\g<1>{value}", lines[i], count=1)
    return "".join(lines)


@given(journal=mutated_journals())
def test_any_mutated_journal_is_replayed_within_the_contract(journal: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "events.jsonl").write_bytes(journal.encode("utf-8", "surrogateescape"))
        before = tree(root)
        for args in (("timeline", str(root)), ("attach", "--replay", str(root), "--json")):
            result = srtd(*args)
            check(result, root, before, {Path("timeline.svg")})
            assert result.code in (0, 4), result.stderr
            for line in result.stderr.splitlines():
                assert line.startswith(f"srtd: warning: {root}/events.jsonl:") or result.code == 4, line


@settings(max_examples=max(5, settings.default.max_examples // 10))
@given(recipe=mutated_recipes(), bomb=st.sampled_from([0, 5, 10]))
def test_a_sample_in_a_bounded_subprocess_never_hangs_or_blows_up(recipe: dict[str, Any], bomb: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "r.yaml").write_text(dump(recipe, bomb=bomb), encoding="utf-8")
        before = tree(root)
        check(bounded("plan", "r.yaml", "--nodes", NODES, cwd=root), root, before)


# Any JSON value; and objects shaped like events (seq, ts and state, and any of the other
# keys), whose keys carry any such value.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
EVENT_KEYS = ["unit", "prev", "exit_code", "signal", "reason", "attempt", "pid", "detail"]
DETAIL_KEYS = ["job", "job_id", "units", "nodes", "tiers", "log", "step", "seconds", "after", "result", "format"]
STATES = st.sampled_from(["starting", "ready", "stopped", "running", "succeeded", "bogus", ""])
EVENTISH = st.fixed_dictionaries(
    {"seq": st.integers(0, 100), "ts": st.floats(1767000000, 1767000100), "state": STATES | JSON},
    optional={
        **dict.fromkeys(EVENT_KEYS, JSON),
        "unit": st.sampled_from(["etcd", "w0", "bench", "other"]) | JSON,
        "detail": st.fixed_dictionaries({}, optional=dict.fromkeys(DETAIL_KEYS, JSON)) | JSON,
    },
)
JOURNAL_LINE = st.one_of(
    EVENTISH.map(lambda d: json.dumps(d, allow_nan=True) + "\n"),
    JSON.map(lambda v: json.dumps(v, allow_nan=True) + "\n"),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
)


@given(lines=st.lists(st.tuples(st.integers(0, 40), JOURNAL_LINE), min_size=1, max_size=3))
def test_any_line_in_a_journal_gives_a_result_or_one_clean_error(lines: list[tuple[int, str | bytes]]) -> None:
    journal = [line.encode("utf-8") for line in _journal_lines()]
    for at, line in lines:
        journal.insert(min(at, len(journal)), line if isinstance(line, bytes) else line.encode("utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "events.jsonl").write_bytes(b"".join(journal))
        before = tree(root)
        for args in (("timeline", str(root)), ("attach", "--replay", str(root), "--once", "--json")):
            result = srtd(*args)
            check(result, root, before, {Path("timeline.svg")})
            assert result.code in (0, 4), result.stderr
            errors = [line for line in result.stderr.splitlines() if not line.startswith("srtd: warning: ")]
            for line in result.stderr.splitlines():
                assert line in errors or re.match(rf"srtd: warning: {re.escape(str(root))}/events.jsonl(:\d+)?: ", line)
            assert len(errors) == (result.code == 4), result.stderr
