"""Plain-text renderings of a Plan: mermaid and dot graphs, and the sbatch wrapper script."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from srtd.errors import PlanError, Problem
from srtd.unit import Plan, Unit, UnitKind


def _label(unit: Unit) -> str:
    bits = [unit.name, f"{unit.kind.value} on {','.join(unit.nodes)}", f"tier {unit.tier}"]
    if unit.terminal:
        bits.append("terminal")
    if not unit.critical:
        bits.append("non-critical")
    return "\\n".join(bits)


def _node_id(name: str) -> str:
    return "u_" + "".join(c if c.isalnum() else "_" for c in name)


def mermaid(plan: Plan) -> str:
    lines = ["flowchart TD"]
    for phase in plan.phases:
        members = [u for u in plan.units if u.phase == phase]
        if not members:
            continue
        lines.append(f"  subgraph {phase}")
        for unit in members:
            shape = ("[(", ")]") if unit.kind is UnitKind.SERVICE else ("[", "]")
            if unit.kind is UnitKind.BUILD:
                shape = ("[/", "/]")
            label = _label(unit).replace("\\n", "<br/>").replace('"', "'")
            lines.append(f'    {_node_id(unit.name)}{shape[0]}"{label}"{shape[1]}')
        lines.append("  end")
    for unit in plan.units:
        for edge in unit.after:
            lines.append(f"  {_node_id(edge.unit)} -->|{edge.condition.value}| {_node_id(unit.name)}")
    return "\n".join(lines) + "\n"


def dot(plan: Plan) -> str:
    lines = [f'digraph "{_dot_text(plan.name)}" {{', "  rankdir=TB;", "  node [shape=box, fontsize=10];"]
    for phase in plan.phases:
        members = [u for u in plan.units if u.phase == phase]
        if not members:
            continue
        lines.append(f'  subgraph "cluster_{phase}" {{')
        lines.append(f'    label="{phase}";')
        for unit in members:
            style = ', style="dashed"' if not unit.critical else ""
            shape = ', shape="cylinder"' if unit.kind is UnitKind.SERVICE else ""
            lines.append(f'    "{_dot_text(unit.name)}" [label="{_dot_text(_label(unit))}"{shape}{style}];')
        lines.append("  }")
    for unit in plan.units:
        for edge in unit.after:
            lines.append(f'  "{_dot_text(edge.unit)}" -> "{_dot_text(unit.name)}" [label="{edge.condition.value}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace('"', '\\"')


def _one_line(what: str, value: str, path: str) -> str:
    # A newline in an #SBATCH value would end the comment and run as script.
    if "\n" in value or "\r" in value:
        raise PlanError(Problem(f"{what} must be one line, got {value!r}", path=path))
    return value


# Where each #SBATCH value is written in a recipe (the cluster settings may give it instead).
_SBATCH_KEYS = {
    "job-name": "name",
    "account": "slurm.account",
    "partition": "slurm.partition",
    "time": "slurm.time_limit",
}


def _word(arg: str) -> str:
    """shlex.quote, except that `${SLURM_JOB_ID}` stays expandable (srtd submit's frozen paths)."""
    slot = "${SLURM_JOB_ID}"
    if slot not in arg:
        return shlex.quote(arg)
    return f'"{slot}"'.join(shlex.quote(p) if p else "" for p in arg.split(slot))


def sbatch_script(plan: Plan, run_args: Sequence[str], *, srtd: Sequence[str] = ("srtd",)) -> str:
    """The batch script: #SBATCH lines, then `exec srtd run ...` so srtd is the batch shell
    and receives the early-warning signal itself."""
    spec = plan.sbatch
    if spec is None:
        raise PlanError("a local plan has no sbatch script; plan without --local")
    directives: list[tuple[str, str | None]] = [
        ("job-name", spec.job_name),
        ("nodes", str(spec.nodes)),
        ("ntasks", str(spec.ntasks)),
        ("ntasks-per-node", str(spec.ntasks_per_node)),
    ]
    if spec.gpus_per_node:
        directives.append(("gpus-per-node", str(spec.gpus_per_node)))
    for key, value in (("account", spec.account), ("partition", spec.partition), ("time", spec.time_limit)):
        if value:
            directives.append((key, value))
    if spec.signal:
        directives.append(("signal", spec.signal))
    directives += [(k, v or None) for k, v in spec.directives.items()]
    lines = ["#!/bin/bash"]
    for key, value in directives:
        path = _SBATCH_KEYS.get(key, f"sbatch_directives.{key}")
        _one_line("an #SBATCH key", key, path)
        if value is None:
            lines.append(f"#SBATCH --{key}")
        else:
            lines.append(f"#SBATCH --{key}={shlex.quote(_one_line(f'#SBATCH --{key}', value, path))}")
    budget = plan.teardown
    lines += [
        "",
        f"# srtd stops the job tier by tier on SIGUSR1, {budget.early_warning_seconds} s before the time limit;",
        f"# its teardown budget is {budget.total_seconds:g} s (KillWait {budget.kill_wait_seconds:g} s).",
        "set -eu",
        f"exec {' '.join(_word(a) for a in [*srtd, 'run', *run_args])}",
    ]
    return "\n".join(lines) + "\n"
