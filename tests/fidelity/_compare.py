"""Compare what srtctl launches (a snapshot) with what srtd plans for the same recipe.

`compare(pair)` plans the recipe under the mock's conditions (its node list, every
node at 127.0.0.1, `<output>`/`<model>`/`<repo>` placeholders as paths) and matches
each upstream step with an srtd unit.  Every difference is a `Diff`; `ALLOWED`
(in `_allowed.py`) decides which ones srtd makes on purpose.
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from srtd._source import source_dir
from srtd.cluster import Cluster
from srtd.launch import srun_nodelist
from srtd.layout import LogLayout, Place, directory
from srtd.plan import build_plan
from srtd.recipe import load_text, migrate_text
from srtd.unit import Plan, Unit, UnitKind
from tests.fidelity._snapshot import Snapshot, Step, read_snapshot
from tests.reference import REFERENCE

LAUNCH = REFERENCE / "upstream-launch"
SPARE_NODES = 2  # the mock's allocation: the recipe's nodes plus two
OUTPUT = "<output>"
LOGS = f"{OUTPUT}/logs"  # the job's log directory, mounted at /logs
MODEL = "<model>"
MODEL_HOST = "/tmp/mock/model"  # the mock's model directory; served as `model` by default
REPO = "<repo>"
# the mock ran without SRTCTL_SOURCE_DIR: `$SRTCTL_SOURCE_DIR/x` stayed a relative path under its temp directory
SOURCE_DIR = "<tmp>/$SRTCTL_SOURCE_DIR"


@dataclass(frozen=True)
class Diff:
    """One difference between an upstream step and srtd's unit."""

    step: str  # the upstream step's name (or srtd's unit name for an extra unit)
    aspect: str  # missing, extra, nodes, log, program, flag, env, image, mount, srun
    key: str  # the flag, variable, mount or option; "" for whole-step aspects
    upstream: Any
    srtd: Any

    def line(self) -> str:
        where = f"{self.step} {self.aspect}" + (f" {self.key}" if self.key else "")
        return f"{where}: upstream {self.upstream!r} / srtd {self.srtd!r}"


@dataclass
class Outcome:
    """One example compared: the counts behind the agreement and every difference."""

    example: str
    steps: int = 0  # upstream steps
    matched: int = 0
    flags: int = 0
    flags_agree: int = 0
    env: int = 0
    env_agree: int = 0
    upstream_flags: int = 0  # of upstream's own flags and variables: how many srtd sets the same
    upstream_flags_kept: int = 0
    upstream_env: int = 0
    upstream_env_kept: int = 0
    diffs: list[Diff] = field(default_factory=list)
    error: str | None = None
    recipe: dict[str, Any] = field(default_factory=dict)
    units: tuple[str, ...] = ()  # srtd's unit names
    spare: tuple[str, ...] = ()  # the mock's nodes the plan leaves unused
    layout: str = "flat"  # the log layout of the srtctl that made the snapshot (log_layout_of)


def pairs() -> list[str]:
    """Every example with a snapshot, as `<engine>__<name>`."""
    return sorted(p.stem for p in (LAUNCH / "snapshots").glob("*.txt"))


def load_pair(name: str) -> tuple[Snapshot, Path]:
    snap = read_snapshot(LAUNCH / "snapshots" / f"{name}.txt")
    return snap, LAUNCH / snap.recipe


# --------------------------------------------------------------------------- planning


def plan_like_the_mock(recipe_file: Path, node_count: int, layout: LogLayout) -> tuple[Plan, dict[str, Any]]:
    """srtd's plan for the recipe on the mock's allocation (keys older than `engine:` migrated first),
    with the log layout of the srtctl that made the snapshot."""
    from ruamel.yaml import YAML

    text = migrate_text(recipe_file.read_text(), str(recipe_file)).text
    data = YAML(typ="safe", pure=True).load(text)
    loaded = load_text(text, str(recipe_file))[0]
    recipe = loaded.recipe
    nodes = [f"node-{i:02d}" for i in range(1, node_count + 1)]
    cluster = Cluster(
        model_paths={recipe.model.path: MODEL_HOST},
        benchmark_scripts=f"{REPO}/src/srtctl/benchmarks/scripts",
        log_layout=layout,
    )
    plan = build_plan(
        loaded,
        cluster,
        nodes=nodes,
        job_id="4242",
        log_dir=LOGS,
        addresses=dict.fromkeys(nodes, "127.0.0.1"),
    )
    return plan, data


# the directories only the split layout has (workers/, services/logs/, telemetry/)
_SPLIT_ONLY = {directory("split", p) for p in Place} - {directory("flat", p) for p in Place}


def log_layout_of(snap: Snapshot) -> LogLayout:
    """The log layout of the srtctl that made the snapshot: `split` once any step writes its
    output into a directory only that layout has, else the older `flat` one."""
    for step in snap.steps:
        folder = posixpath.dirname(step.fields.get("output", ""))
        if folder.startswith(LOGS + "/") and folder.removeprefix(LOGS + "/") in _SPLIT_ONLY:
            return "split"
    return "flat"


def allocation_size(snap: Snapshot) -> int:
    """The mock's node count: the highest node-NN any step names."""
    numbers = [int(m) for s in snap.steps for n in s.nodes for m in re.findall(r"node-(\d+)", n)]
    return max(numbers, default=1)


# --------------------------------------------------------------------------- matching


_WORKER_STEP = re.compile(r"(prefill|decode|agg)_(\d+)_(.+?)(_e\d+)?")


def match_steps(snap: Snapshot, plan: Plan) -> list[tuple[Step, Unit | None]]:
    """Pair every upstream step with srtd's unit for it (None: srtd has none)."""
    used: set[str] = set()
    out: list[tuple[Step, Unit | None]] = []
    for step in snap.steps:
        free = [u for u in plan.units if u.name not in used]
        unit = next((u for rule in _RULES for u in free if rule(step, u)), None)
        if unit is not None:
            used.add(unit.name)
        out.append((step, unit))
    return out


def _same_name(step: Step, unit: Unit) -> bool:
    return unit.name == step.name


def _one_shot(step: Step, unit: Unit) -> bool:
    # srtctl's one-shot steps have no step name; srtd names them as their log (`host_setup_<node>`)
    return step.name == f"<unnamed {unit.name}>"


def _benchmark(step: Step, unit: Unit) -> bool:
    return step.name == "<unnamed benchmark>" and unit.kind == UnitKind.BENCHMARK


def _worker(step: Step, unit: Unit) -> bool:
    # the same role and index; a node the recipe placed elsewhere shows up as a `nodes` difference
    m = _WORKER_STEP.fullmatch(step.name)
    if m is None or unit.kind != UnitKind.WORKER:
        return False
    shadow = m.group(4) or ""
    ours = re.search(r"_e\d+$", unit.name)
    return unit.role == m.group(1) and unit.index == int(m.group(2)) and (ours.group(0) if ours else "") == shadow


def _service(step: Step, unit: Unit) -> bool:
    if unit.kind != UnitKind.SERVICE:
        return False
    if not step.name.startswith("service_"):
        return unit.name == f"service_{step.name}"  # srtd names every service unit service_<name>
    return _service_matches(unit, step)


def _frontend(step: Step, unit: Unit) -> bool:
    name = step.name
    if name.startswith(("service_", "<unnamed")) or name == "tachometer" or _WORKER_STEP.fullmatch(name):
        return False
    return unit.kind == UnitKind.FRONTEND


_RULES = (_same_name, _one_shot, _benchmark, _worker, _service, _frontend)


def _service_matches(unit: Unit, step: Step) -> bool:
    # srtd names one instance `service_<name>`, several `service_<name>_<node>`.
    if unit.name == step.name:
        return True
    return bool(step.nodes) and unit.name + "_" + step.nodes[0] == step.name and tuple(step.nodes) == unit.nodes


# --------------------------------------------------------------------------- commands


def split_command(argv: list[str]) -> tuple[list[str], list[tuple[str, tuple[str, ...]]]]:
    """The program (everything before the first `--flag`) and the flags with their values."""
    program: list[str] = []
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
        program.append(argv[i])
        i += 1
    flags: list[tuple[str, tuple[str, ...]]] = []
    while i < len(argv):
        token = argv[i]
        i += 1
        name, eq, value = token.partition("=")
        values: list[str] = [value] if eq else []
        while not eq and i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        flags.append((name.removeprefix("--"), tuple(values)))
    return program, flags


def processes(argv: list[str]) -> list[list[str]]:
    """The commands a step runs: itself, or each `cmd &` of a supervising `bash -c` script."""
    if len(argv) == 3 and argv[0] == "bash" and argv[1] in ("-c", "-lc"):
        lines = [line.strip() for line in argv[2].splitlines()]
        started = [line[:-1] for line in lines if line.endswith(" &")]
        execs = [line.rsplit("exec ", 1)[1] for line in lines if line.startswith("exec ") or "; exec " in line]
        started += [e for e in execs if e[:1].isalpha() or e[:1] == "/"]  # not `exec 3>&-`
        if started:
            return [shlex.split(line) for line in started]
    return [argv]


def command_parts(argv: list[str]) -> tuple[str, list[tuple[str, tuple[str, ...]]]]:
    """Programs (joined with ` + ` for several processes) and every flag of a step.

    Within one command line a flag given again with the same value is one `--flag value`
    pair (srtctl writes vLLM's `--served-model-name` twice, its own and the role's): the
    process is launched the same either way.  Repeats with other values, and the same pair
    in two processes of one step, all count.
    """
    programs, flags = [], []
    for proc in processes(argv):
        program, own = split_command(proc)
        programs.append(" ".join(program))
        flags += dict.fromkeys(own)
    return " + ".join(programs), flags


def _by_name(flags: list[tuple[str, tuple[str, ...]]]) -> dict[str, Counter[tuple[str, ...]]]:
    out: dict[str, Counter[tuple[str, ...]]] = {}
    for name, values in flags:
        out.setdefault(name, Counter())[values] += 1
    return out


def _show(values: Counter[tuple[str, ...]] | None) -> Any:
    if values is None:
        return None
    items = [" ".join(v) for v in values.elements()]
    return items[0] if len(items) == 1 else items


# --------------------------------------------------------------------------- comparing


def _placeholders(unit: Unit) -> Unit:
    """Write the mock's model directory as the snapshots do (`<model>`)."""

    def sub(text: str) -> str:
        return text.replace(MODEL_HOST, MODEL)

    def source(host: str) -> str:
        # srtd's value of the variable (docs/recipe.md) written as the mock's
        ours = source_dir()
        return SOURCE_DIR + host[len(ours) :] if host == ours or host.startswith(ours + "/") else host

    update: dict[str, Any] = {
        "argv": tuple(sub(a) for a in unit.argv),
        "env": {k: sub(v) for k, v in unit.env.items()},
    }
    if unit.container is not None:
        mounts = {source(sub(h)): c for h, c in unit.container.mounts.items()}
        update["container"] = replace(unit.container, mounts=mounts)
    return replace(unit, **update)


def unit_env(unit: Unit) -> dict[str, str]:
    return {**unit.env, **unit.srun.export_env}


def compare_step(step: Step, unit: Unit, out: Outcome) -> None:
    name = step.name
    diffs = out.diffs
    hosts = srun_nodelist(unit)  # what srun is given: one host per task under arbitrary distribution
    if list(step.nodes) != hosts:
        diffs.append(Diff(name, "nodes", "", step.nodes, hosts))
    # where the step's log goes (the layout's directory and the file's name)
    our_log = posixpath.join(LOGS, unit.log)
    if "output" in step.fields and step.fields["output"] != our_log:
        diffs.append(Diff(name, "log", "", step.fields["output"], our_log))
    up_prog, up_flags = command_parts(step.argv)
    our_prog, our_flags = command_parts(list(unit.argv))
    if up_prog != our_prog:
        # name the one difference the allow-list may want to judge on its own
        same_but_python = re.sub(r"\bpython\b", "python3", up_prog) == our_prog
        diffs.append(Diff(name, "program", "python-vs-python3" if same_but_python else "", up_prog, our_prog))
    ups, ours = _by_name(up_flags), _by_name(our_flags)
    _tally(out, name, "flag", "flags", {k: _show(v) for k, v in ups.items()}, {k: _show(v) for k, v in ours.items()})
    # a block scalar's final newline does not survive the snapshot's format
    up_env = {k: v.rstrip("\n") for k, v in step.env.items()}
    our_env = {k: v.rstrip("\n") for k, v in unit_env(unit).items()}
    _tally(out, name, "env", "env", up_env, our_env)
    image = unit.container.image if unit.container else None
    if image and image.startswith("/") and step.fields.get("container_image") == "<container>":
        image = "<container>"  # the mock writes image files as <container>
    if step.fields.get("container_image") != image:
        diffs.append(Diff(name, "image", "", step.fields.get("container_image"), image))
    up_mounts = step.maps.get("container_mounts", {})
    our_mounts = dict(unit.container.mounts) if unit.container else {}
    for host in dict.fromkeys([*up_mounts, *our_mounts]):
        if up_mounts.get(host) != our_mounts.get(host):
            diffs.append(Diff(name, "mount", host, up_mounts.get(host), our_mounts.get(host)))
    _compare_srun(step, unit, diffs)


def _tally(out: Outcome, step: str, aspect: str, counter: str, ups: dict[str, Any], ours: dict[str, Any]) -> None:
    """Count agreement of one kind of key/value pairs (flags or variables) and record each difference."""
    for key in dict.fromkeys([*ups, *ours]):
        same = same_value(ups.get(key), ours.get(key))
        setattr(out, counter, getattr(out, counter) + 1)
        setattr(out, f"{counter}_agree", getattr(out, f"{counter}_agree") + same)
        if key in ups:
            setattr(out, f"upstream_{counter}", getattr(out, f"upstream_{counter}") + 1)
            setattr(out, f"upstream_{counter}_kept", getattr(out, f"upstream_{counter}_kept") + same)
        if not same:
            out.diffs.append(Diff(step, aspect, key, ups.get(key), ours.get(key)))


RANDOM = "<random>"  # the snapshots' mark for a value upstream draws afresh on each run


def same_value(upstream: Any, ours: Any) -> bool:
    """Equal, where a `<random>` part of upstream's value stands for any non-empty text of srtd's."""
    if isinstance(upstream, str) and RANDOM in upstream and isinstance(ours, str):
        pattern = ".+".join(re.escape(part) for part in upstream.split(RANDOM))
        return re.fullmatch(pattern, ours) is not None
    return bool(upstream == ours)


def _compare_srun(step: Step, unit: Unit, diffs: list[Diff]) -> None:
    name, srun = step.name, unit.srun
    up_opts = step.maps.get("srun_options", {})
    for key in dict.fromkeys([*up_opts, *srun.options]):
        if up_opts.get(key) != srun.options.get(key):
            diffs.append(Diff(name, "srun", key, up_opts.get(key), srun.options.get(key)))
    pairs = {
        "ntasks": (step.fields.get("ntasks", "1"), str(srun.ntasks)),
        "mpi": (step.fields.get("mpi"), srun.mpi),
        "cpu_bind": (step.fields.get("cpu_bind"), srun.cpu_bind),
        "oversubscribe": (step.fields.get("oversubscribe", "False"), str(srun.oversubscribe)),
        "shell": (step.fields.get("use_bash_wrapper", "True"), str(srun.shell)),
    }
    for key, (up, ours) in pairs.items():
        if up != ours:
            diffs.append(Diff(name, "srun", key, up, ours))


@functools.cache
def compare(name: str) -> Outcome:
    """Plan one example like the mock and compare it with its snapshot."""
    snap, recipe_file = load_pair(name)
    out = Outcome(name, steps=len(snap.steps))
    try:
        out.layout = log_layout_of(snap)
        plan, out.recipe = plan_like_the_mock(recipe_file, allocation_size(snap), out.layout)
    except Exception as err:  # a recipe srtd refuses: reported, judged by the test
        out.error = f"{type(err).__name__}: {err}"
        return out
    out.units = tuple(u.name for u in plan.units)
    out.spare = tuple(plan.nodes.get("unused", ()))
    matched = match_steps(snap, plan)
    for step, unit in matched:
        if unit is None:
            # The mock runs per-node services on its two spare nodes too; a real job has none.
            spare = bool(step.nodes) and set(step.nodes) <= set(plan.nodes.get("unused", ()))
            aspect = "spare" if spare else "missing"
            out.diffs.append(Diff(step.name, aspect, "", step.fields.get("command", "").strip(), None))
            continue
        out.matched += 1
        compare_step(step, _placeholders(unit), out)
    seen = {u.name for _, u in matched if u is not None}
    for unit in plan.units:
        if unit.name not in seen:
            out.diffs.append(Diff(unit.name, "extra", "", None, " ".join(unit.argv)))
    return out


# --------------------------------------------------------------------------- the allow-list


@dataclass(frozen=True)
class Allow:
    """A difference srtd makes on purpose.  Globs (`a|b` for either) match the example, step, aspect and key."""

    step: str
    aspect: str
    key: str
    reason: str
    example: str = "*"
    side: str = "both"  # "added": only where upstream has none; "dropped": only where srtd has none
    when: Callable[[Outcome], bool] | None = None  # only for examples where this holds
    values: Callable[[Diff, Outcome], bool] | None = None  # only where the two values differ this way

    def covers(self, example: str, diff: Diff, out: Outcome | None = None) -> bool:
        return (
            (self.when is None or (out is not None and self.when(out)))
            and (self.values is None or (out is not None and self.values(diff, out)))
            and (self.side != "added" or diff.upstream is None)
            and (self.side != "dropped" or diff.srtd is None)
            and _matches(example, self.example)
            and _matches(diff.step, self.step)
            and _matches(diff.aspect, self.aspect)
            and _matches(diff.key, self.key)
        )


def _matches(text: str, patterns: str) -> bool:
    """A glob, or several separated by `|`."""
    return any(fnmatch.fnmatchcase(text, p) for p in patterns.split("|"))


def unexplained(out: Outcome, allowed: tuple[Allow, ...]) -> list[Diff]:
    return [d for d in out.diffs if not any(a.covers(out.example, d, out) for a in allowed)]


def agreement(out: Outcome, allowed: tuple[Allow, ...]) -> tuple[float, float]:
    """Flags and env agreement once the allow-list's differences count as agreeing."""
    ok = [d for d in out.diffs if any(a.covers(out.example, d, out) for a in allowed)]
    flags = out.flags_agree + sum(d.aspect == "flag" for d in ok)
    env = out.env_agree + sum(d.aspect == "env" for d in ok)
    return percent(flags, out.flags), percent(env, out.env)


def kept_without(out: Outcome, left_out: tuple[Allow, ...]) -> tuple[int, int, int, int]:
    """(flags kept, upstream flags, env kept, upstream env), without what `left_out` covers.

    A flag or variable upstream sets differently only because of the mock's allocation
    (its spare nodes, its colocate oddity: `MOCK`), or only because the snapshot is of an
    older srtctl (`SUPERSEDED`), is not what srtctl does on a real job today: it leaves the
    count altogether instead of counting as a difference.
    """
    gone = [d for d in out.diffs if d.upstream is not None and any(a.covers(out.example, d, out) for a in left_out)]
    flags = sum(d.aspect == "flag" for d in gone)
    env = sum(d.aspect == "env" for d in gone)
    return out.upstream_flags_kept, out.upstream_flags - flags, out.upstream_env_kept, out.upstream_env - env


def percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 100.0
