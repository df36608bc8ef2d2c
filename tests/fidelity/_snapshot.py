"""Reading upstream's launch snapshots (`upstream-launch/snapshots/*.txt`).

A snapshot is one `## <step>` block per srun call, each a few `key: value` lines,
`key:` followed by an indented mapping, or `key: |` followed by an indented text.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Step:
    """One srun call srtctl makes."""

    name: str
    fields: dict[str, str] = field(default_factory=dict)
    maps: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.fields.get("command", ""))

    @property
    def nodes(self) -> list[str]:
        # the mock writes a step's hosts space-separated (one per task under arbitrary distribution)
        text = self.fields.get("nodelist", "")
        return [n for n in text.replace(",", " ").split() if n]

    @property
    def env(self) -> dict[str, str]:
        return {**self.maps.get("env_to_set", {}), **self.maps.get("srun_export_env", {})}


@dataclass
class Snapshot:
    recipe: str  # examples/<path>.yaml
    steps: list[Step]


_TOP_KEY = re.compile(r"[a-z_]+:( |$)")


def read_snapshot(path: Path) -> Snapshot:
    lines = path.read_text().splitlines()
    recipe = lines[0].removeprefix("# ").strip()
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("## "):
            steps.append(Step(line[3:].strip()))
            continue
        if not steps or not line.strip() or line.startswith((" ", "#")):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        block: list[str] = []
        while i < len(lines) and _continues(lines[i], value == "|"):
            if lines[i].startswith("    "):
                block.append(lines[i][4:])
            elif block:
                block[-1] += "\n" + lines[i]  # the next line of a multi-line mapping value
            i += 1
        step = steps[-1]
        if value == "|":
            step.fields[key] = "\n".join(block)
        elif block:
            step.maps[key] = dict(_pair(b) for b in block)
        else:
            step.fields[key] = value
    for step in steps:
        if step.name == "<unnamed>" and "output" in step.fields:
            # one-shot steps have no step name; their log tells them apart (benchmark, host_setup_<node>, ...)
            stem = step.fields["output"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            step.name = f"<unnamed {stem}>"
    return Snapshot(recipe, steps)


def _continues(line: str, literal: bool) -> bool:
    if line.startswith("    "):
        return True
    if literal or not line.strip():
        return False
    return not line.startswith("## ") and not _TOP_KEY.match(line)


def _pair(line: str) -> tuple[str, str]:
    key, sep, value = line.partition(": ")
    if not sep:  # `KEY:` with an empty value
        return line.strip().removesuffix(":"), ""
    return key.strip(), value
