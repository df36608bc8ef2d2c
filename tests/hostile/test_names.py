"""Property: any text as a job, role, service, sweep or override name loads, or is one recipe error at its line.

Names reach Slurm job names, unit names, log file names, variant names and journals,
so a name that cannot be one of those (a `/`, a control character, half of a UTF-16
surrogate pair, ...) must be refused where it is written, never crash a later step.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from tests.hostile.helpers import DOCUMENTED, srtd
from tests.recipe.samples import BASE

LOCATED = re.compile(r"^(srtd: )?\S+\.yaml:\d+:\d+( \[[^\]]*\])?[ :]")

# Where a name is written: the recipe with NAME in its place (JSON text is a YAML
# double-quoted scalar, so every character arrives as written, surrogates too).
PLACES = {
    "job": BASE.replace("name: t\n", "name: NAME\n"),
    "role": BASE.replace("  agg:\n", "  NAME:\n"),
    "service": BASE + "services:\n  - name: NAME\n    command: [sleep, '1']\n",
    "sweep-value": BASE.replace("name: t\n", "name: t-{v}\nsweep:\n  v: [NAME]\n"),
    "sweep-parameter": BASE.replace("name: t\n", "name: t\nsweep:\n  NAME: [1, 2]\n"),
    "override": "schema: 2\nbase:\n" + "".join(f"  {line}\n" for line in BASE.splitlines()[1:]) + "NAME: {}\n",
}


def _error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if "warning:" not in line]


@given(place=st.sampled_from(sorted(PLACES)), name=st.text(max_size=40))
@example(place="job", name="t\ud800")
@example(place="service", name="../x")
@example(place="sweep-value", name="a/b")
@example(place="override", name="override_x\x00")
@example(place="role", name="\u00b2")  # a digit to str.isdigit, not to int()
def test_any_name_loads_or_is_one_recipe_error_at_its_place(place: str, name: str) -> None:
    text = PLACES[place].replace("NAME", json.dumps(name))
    with tempfile.TemporaryDirectory() as tmp:
        recipe = Path(tmp) / "r.yaml"
        recipe.write_text(text, encoding="utf-8")
        result = srtd("validate", str(recipe))
    assert result.code in DOCUMENTED - {1}, result.stderr
    errors = _error_lines(result.stderr)
    if result.code == 0:
        assert errors == []
        return
    assert result.code == 2, result.stderr
    assert len(errors) == 1, result.stderr
    assert LOCATED.match(errors[0]), errors[0]
