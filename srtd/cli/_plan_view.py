"""The human view of a plan: nodes, then units by phase, then the teardown budget.

Warnings are not part of the view: every command prints them the same way (`_verdict`).
"""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.table import Table
from rich.text import Text

from srtd.unit import FileProbe, HttpProbe, Liveness, LogProbe, Plan, Probe, Readiness, TcpProbe, Unit, WorkerCountProbe


def describe_readiness(ready: Readiness | None) -> str:
    if ready is None:
        return "started"
    return f"{_probe(ready.probe)} within {ready.timeout_seconds:g} s"


def describe_liveness(live: Liveness) -> str:
    """`every 10 s: http node1:7500/health = 200 (timeout 5 s); log silence 300 s; unhealthy after 3 ...`."""
    checks = []
    if live.probe is not None:
        timeout = "" if isinstance(live.probe, LogProbe) else f" (timeout {live.timeout_seconds:g} s)"
        checks.append(f"{_probe(live.probe)}{timeout}")
    if live.log_silence_seconds is not None:
        checks.append(f"log silence {live.log_silence_seconds:g} s")
    every = f"every {live.period_seconds:g} s"
    return f"{every}: {'; '.join(checks)}; unhealthy after {live.failure_threshold} failed in a row"


def _probe(probe: Probe) -> str:
    if isinstance(probe, TcpProbe):
        what = f"tcp {probe.node}:{probe.port}"
    elif isinstance(probe, HttpProbe):
        what = f"http {probe.node}:{probe.port}{probe.path} = {probe.status}"
    elif isinstance(probe, LogProbe):
        what = f"log /{probe.pattern}/"
    elif isinstance(probe, FileProbe):
        what = f"file {probe.path}"
    else:
        assert isinstance(probe, WorkerCountProbe)
        what = (
            f"workers {probe.node}:{probe.port}{probe.path} "
            f"prefill>={probe.expect_prefill} decode>={probe.expect_decode}"
        )
    return what


def describe_restart(unit: Unit) -> str:
    r = unit.restart
    if r.policy.value == "never":
        return "never"
    return f"{r.policy.value} x{r.max_restarts} ({r.backoff_seconds:g}s..{r.max_backoff_seconds:g}s)"


def command_line(unit: Unit) -> str:
    text = shlex.join(unit.argv)
    if unit.preamble:
        text = unit.preamble.replace("\n", "; ") + "; exec " + text
    return text


def render_plan(plan: Plan, console: Console) -> None:
    """Units show their command; under Slurm the exact srun line `srtd run` executes."""
    where = "local (this machine)" if plan.local else "Slurm"
    console.print(Text(f"{plan.name}", style="bold"), Text(f"  job {plan.job_id} · {where} · logs {plan.log_dir}"))
    if plan.variant:
        console.print(f"variant: {plan.variant}")
    nodes = Table(title="Nodes", title_justify="left", show_edge=False, box=None, pad_edge=False)
    nodes.add_column("role", style="cyan")
    nodes.add_column("nodes")
    for role, names in plan.nodes.items():
        nodes.add_row(role, ", ".join(names))
    if plan.spares:
        nodes.add_row("spare", ", ".join(plan.spares))
    nodes.add_row("total", str(len(plan.allocation) - len(plan.nodes.get("unused", ()))))
    console.print(nodes)
    if plan.spares:
        console.print(_spares_line(plan), markup=False)
    for phase in plan.phases:
        members = [u for u in plan.units if u.phase == phase]
        if not members:
            continue
        console.print()
        console.print(Text(f"── {phase} ", style="bold magenta"))
        for unit in members:
            _render_unit(unit, console, plan.srun_lines.get(unit.name))
    console.print()
    budget = plan.teardown
    tiers = ", ".join(f"tier {t}: {s:g} s" for t, s in budget.tiers.items())
    console.print(
        f"teardown: {budget.total_seconds:g} s ({tiers}); Slurm KillWait {budget.kill_wait_seconds:g} s", end=""
    )
    if budget.early_warning_seconds:
        console.print(f"; early warning USR1 {budget.early_warning_seconds} s before the limit", end="")
    console.print()
    if plan.gate:
        console.print(f"frontend gate: {plan.gate}")
    if plan.hold:
        console.print("runs until stopped (manual benchmark, no terminal unit)")
    if not plan.preflight:
        console.print("preflight: off (the nodes are not checked before launch)")
    for path in plan.files:
        console.print(f"writes: {path}")
    if plan.reporting is not None:
        where = ", ".join(plan.reporting.endpoints)
        prefix = f", job id {plan.reporting.job_id_prefix}<job id>" if plan.reporting.job_id_prefix else ""
        console.print(f"status reporting: {where} (token from ${plan.reporting.token_env}{prefix})", markup=False)
    if plan.power is not None:
        power = plan.power
        gate = "; the job fails (exit 7) unless every window is covered" if power.required else ""
        console.print(
            f"power: {power.metric} from {len(power.endpoints)} exporter(s) every {power.interval_seconds:g} s"
            f" -> {power.dir}/samples.csv, windows checked into manifest.json{gate}",
            markup=False,
        )


def _render_unit(unit: Unit, console: Console, srun_line: str | None) -> None:
    head = Text("● ", style="green" if unit.critical else "dim")
    head.append(unit.name, style="bold")
    head.append(f"  {unit.kind.value} on {','.join(unit.nodes)}")
    if unit.gpus:
        head.append(f"  gpus {','.join(map(str, unit.gpus))}")
    console.print(head)
    facts = [f"tier {unit.tier}", "critical" if unit.critical else "non-critical"]
    if unit.terminal:
        facts.append("terminal")
    facts.append(f"restart {describe_restart(unit)}")
    if unit.ports:
        facts.append("ports " + " ".join(f"{k}={v}" for k, v in unit.ports.items()))
    console.print("    " + " · ".join(facts), highlight=False)
    console.print(f"    ready: {describe_readiness(unit.readiness)}", highlight=False)
    if unit.liveness is not None:
        console.print(f"    alive: {describe_liveness(unit.liveness)}", highlight=False)
    if unit.after:
        waits = ", ".join(f"{e.unit} ({e.condition.value})" for e in unit.after[:6])
        more = f" +{len(unit.after) - 6} more" if len(unit.after) > 6 else ""
        console.print(f"    after: {waits}{more}", highlight=False)
    env = {k: v for k, v in unit.env.items() if not k.startswith("SRTD_")}
    if env:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        console.print(f"    env: {shown}", highlight=False, soft_wrap=True)
    if unit.implied_by:
        console.print(f"    implied by: {unit.implied_by}", highlight=False)
    if unit.container:
        console.print(f"    image: {unit.container.image}", highlight=False)
    if unit.run_timeout:
        console.print(f"    killed after {unit.run_timeout:g} s", highlight=False)
    console.print(Text("    $ ", style="dim") + Text(srun_line or command_line(unit)), soft_wrap=True, highlight=False)


def _spares_line(plan: Plan) -> str:
    """What the spares would take over: the units of any node that fails preflight or is lost."""
    spare = plan.spares[0]
    busy = sorted({n for u in plan.units for n in u.nodes if not u.on_teardown})
    load = ", ".join(f"{n} ({_count(plan, n)})" for n in busy)
    return (
        f"spares: {', '.join(plan.spares)} held back (sbatch --no-kill); the first healthy one takes over every"
        f" unit, GPU and port of a node that fails preflight or is lost: {load}; e.g. {busy[0]} -> {spare}"
        if busy
        else f"spares: {', '.join(plan.spares)} held back (sbatch --no-kill); no node carries units"
    )


def _count(plan: Plan, node: str) -> str:
    count = sum(node in u.nodes for u in plan.units)
    return f"{count} unit" if count == 1 else f"{count} units"
