"""The plan's data types: `Unit`, `Plan` and what they carry.

This module is the bottom layer of srtd: it imports nothing of srtd's but the helpers
below it (`_files`, `_json`, `_shape`, `_record`, and `_unit_knobs`, the rest of its
types).  Engines, frontends and service kinds produce `Unit`s; the plan builder assembles
a `Plan`; the supervisor and the launchers read them and nothing else.  The JSON form of a
`Plan` (`Plan.dumps`) is a documented contract (docs/plan.md): fields are added, never
renamed or re-typed without bumping `PLAN_FORMAT`.

Frozen dataclasses, not pydantic models: `srtd run PLAN.json` must not pay for building
pydantic's validators (srtd/_record.py says why and how).  Each type's `SPEC` names its
fields' specs in declared order; `Plan.loads` checks a saved plan against them and refuses
one with pydantic's words and the field's location, as before.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import field
from enum import StrEnum
from typing import Any, Literal

from srtd import _shape as s
from srtd._files import within
from srtd._json import TooDeep, loads_bounded
from srtd._record import (
    EnumOf,
    LaxNum,
    Record,
    RecordOf,
    TupleOf,
    check_record,
    record,
)
from srtd._shape import ShapeError
from srtd._unit_knobs import (
    AMOUNT,
    BOOL,
    INT,
    INTERVAL,
    OPT_STR,
    PROBE,
    SECONDS,
    SRUN_OWNED_FLAGS,
    STR,
    STR_MAP,
    STRS,
    Container,
    Count,
    FileProbe,
    HttpProbe,
    Liveness,
    LogProbe,
    Probe,
    Readiness,
    Restart,
    RestartMode,
    ResultsSpec,
    Srun,
    TcpProbe,
    WorkerCountProbe,
)

__all__ = [
    "PLAN_DEPTH",
    "PLAN_FORMAT",
    "PROBE",
    "SRUN_OWNED_FLAGS",
    "Condition",
    "Container",
    "Count",
    "Edge",
    "FileProbe",
    "HttpProbe",
    "Liveness",
    "LogProbe",
    "Plan",
    "PowerEndpoint",
    "PowerSampling",
    "Probe",
    "Publisher",
    "Readiness",
    "Restart",
    "RestartMode",
    "ResultsSpec",
    "Sbatch",
    "ShapeError",
    "Srun",
    "StatusReporting",
    "TcpProbe",
    "TeardownBudget",
    "Unit",
    "UnitKind",
    "WorkerCountProbe",
    "unsafe_name",
]

PLAN_FORMAT = 1
PLAN_DEPTH = 64  # objects and arrays inside each other in a saved plan; srtd writes under ten


_UNSAFE_NAME = re.compile(r"[/\x00-\x1f\x7f]|\.\.|^\.?$")


def unsafe_name(name: str) -> bool:
    """Whether a name that becomes a path component (a unit, a job id) could leave its directory."""
    return bool(_UNSAFE_NAME.search(name))


class UnitKind(StrEnum):
    SERVICE = "service"
    WORKER = "worker"
    FRONTEND = "frontend"
    BENCHMARK = "benchmark"
    BUILD = "build"
    HOST = "host"  # a node's bare host (no container): host_setup before the job, its teardown after


class Condition(StrEnum):
    """What a dependency must have reached before its dependant starts."""

    STARTED = "started"  # its process has been launched
    READY = "ready"  # its readiness probe passed (or it has no probe and was started)
    SUCCEEDED = "succeeded"  # it exited 0 (one-shot units: clone, build)
    # it has ended, whatever its outcome (host setup steps); a failure that ends the job
    # (a critical unit) keeps its dependants waiting for the teardown instead
    ENDED = "ended"


@record
class Edge(Record):
    unit: str
    condition: Condition = Condition.READY

    SPEC = {"unit": STR, "condition": EnumOf(Condition)}


# --------------------------------------------------------------------------- the unit


@record
class Unit(Record):
    """One supervised process: one Slurm step under the Slurm launcher.

    Everything the supervisor needs is here, so it never looks anything up.
    """

    name: str  # the step name; unique in the plan
    kind: UnitKind
    phase: str
    nodes: tuple[str, ...]
    gpus: tuple[int, ...] = ()  # GPU indices on each of its nodes; () = none or whole node
    argv: tuple[str, ...]
    preamble: str | None = None  # the only shell: run before argv, argv is exec'd after it
    env: dict[str, str] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    cwd: str | None = None
    container: Container | None = None
    srun: Srun = field(default_factory=Srun)
    log: str  # path of its log file
    ports: dict[str, int] = field(default_factory=dict)  # every listener it binds
    after: tuple[Edge, ...] = ()
    readiness: Readiness | None = None
    liveness: Liveness | None = None  # in the JSON only when set (plans before it stay byte-identical)
    fatal_patterns: tuple[str, ...] = ()
    echo: bool = False  # mirror its log lines on srtd's console (a benchmark's `stream_output`)
    restart: Restart = field(default_factory=Restart)
    critical: bool = True
    terminal: bool = False
    tier: int = 0  # teardown order: 0 first, then 1, then 2
    terminate_timeout: float = 30.0
    run_timeout: float | None = None  # one-shot units (clone, build) are killed after this
    group: str | None = None  # units of one group restart together (a multi-node worker)
    role: str | None = None
    index: int | None = None
    implied_by: str | None = None  # why an implicit service is in the plan
    results: ResultsSpec | None = None  # a benchmark's measurements; in the JSON only when set
    # launched by the job's teardown, after every tier is down, instead of at start (a host
    # teardown step); in the JSON only when true
    on_teardown: bool = False
    on_disruption: Literal["restart", "fail"] = "restart"  # a terminal unit across a replacement; JSON: when fail

    SPEC = {
        "name": STR,
        "kind": EnumOf(UnitKind),
        "phase": STR,
        "nodes": STRS,
        "gpus": TupleOf(INT),
        "argv": STRS,
        "preamble": OPT_STR,
        "env": STR_MAP,
        "unset_env": STRS,
        "cwd": OPT_STR,
        "container": s.Nullable(RecordOf(Container)),
        "srun": RecordOf(Srun),
        "log": STR,
        "ports": s.DictOf(INT),
        "after": TupleOf(RecordOf(Edge)),
        "readiness": s.Nullable(RecordOf(Readiness)),
        "liveness": s.Nullable(RecordOf(Liveness)),
        "fatal_patterns": STRS,
        "echo": BOOL,
        "restart": RecordOf(Restart),
        "critical": BOOL,
        "terminal": BOOL,
        "tier": AMOUNT,
        "terminate_timeout": SECONDS,
        "run_timeout": s.Nullable(SECONDS),
        "group": OPT_STR,
        "role": OPT_STR,
        "index": s.Nullable(AMOUNT),
        "implied_by": OPT_STR,
        "results": s.Nullable(RecordOf(ResultsSpec)),
        "on_teardown": BOOL,
        "on_disruption": s.OneOf(("restart", "fail")),
    }
    OMIT = {"liveness": None, "results": None, "on_teardown": False, "on_disruption": "restart"}

    @property
    def node(self) -> str:
        return self.nodes[0]


# --------------------------------------------------------------------------- result publishers


@record
class Publisher(Record):
    """A command run on srtd's host after a job whose results passed the gate (docs/results.md).

    Plain data: srtd writes the results document to its stdin and keeps its output in
    `log` (relative to the log directory); it is killed after `timeout_seconds`.
    """

    name: str
    argv: tuple[str, ...]
    timeout_seconds: float = 60.0
    log: str

    SPEC = {"name": STR, "argv": STRS, "timeout_seconds": SECONDS, "log": STR}


# --------------------------------------------------------------------------- power sampling


@record
class PowerEndpoint(Record):
    """One GPU exporter srtd samples: its node and its metrics URL."""

    node: str
    url: str

    SPEC = {"node": STR, "url": STR}


@record
class PowerSampling(Record):
    """srtd's sampling of GPU power over the job (`telemetry.enabled`, docs/services.md).

    Plain data: every `interval_seconds` srtd reads `metric` from each endpoint, a GPU
    being the sample's `index_label` (and `identity_label`), and appends the readings to
    `<dir>/samples.csv`; the benchmark client marks its windows in `<dir>/windows`; after
    the job `<dir>/manifest.json` says whether every window is covered.  With
    `required`, a job whose power data does not cover its windows fails.
    """

    dir: str  # host path (the log directory's storage_subdir)
    endpoints: tuple[PowerEndpoint, ...]
    metric: str  # the power metric as the exporter writes it (its scope when it has one)
    index_label: str
    identity_label: str | None = None
    interval_seconds: float = 1.0
    request_timeout_seconds: float = 2.0
    required: bool = False

    SPEC = {
        "dir": STR,
        "endpoints": TupleOf(RecordOf(PowerEndpoint)),
        "metric": STR,
        "index_label": STR,
        "identity_label": OPT_STR,
        "interval_seconds": INTERVAL,
        "request_timeout_seconds": SECONDS,
        "required": BOOL,
    }


# --------------------------------------------------------------------------- status reporting


@record
class StatusReporting(Record):
    """Where the job's lifecycle is reported (srt-slurm's status collector contract).

    Plain data: the collectors' base URLs and the *name* of the variable that holds
    the bearer token, never the token itself (docs/plan.md).
    """

    endpoints: tuple[str, ...]  # base URLs, trailing "/" dropped, no duplicates
    token_env: str = "SRTCTL_STATUS_TOKEN"  # the environment variable with the bearer token
    job_id_prefix: str = ""  # the collector knows the job as prefix + job id
    cluster: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # sent with the first PUT of a run
    # also send the journal's events to srtd's extension route: True always, False never, None (the
    # default) to each collector whose `/api/health` says it takes them (an srtd collector)
    units: bool | None = None

    SPEC = {
        "endpoints": STRS,
        "token_env": STR,
        "job_id_prefix": STR,
        "cluster": OPT_STR,
        "metadata": s.DictOf(s.AnyValue()),
        "units": s.Nullable(BOOL),
    }
    # Plans that leave `units` unset keep the exact JSON they had before `units` existed.
    OMIT = {"units": None}


# --------------------------------------------------------------------------- the plan


@record
class TeardownBudget(Record):
    """Σ over tiers of the slowest unit of the tier, against what Slurm allows."""

    tiers: dict[str, float] = field(default_factory=dict)  # tier -> largest terminate timeout
    total_seconds: float = 0.0
    kill_wait_seconds: float = 30.0
    early_warning_seconds: int = 0  # sbatch --signal=B:USR1@<s>
    fits: bool = True

    SPEC = {
        "tiers": s.DictOf(LaxNum()),
        "total_seconds": SECONDS,
        "kill_wait_seconds": SECONDS,
        "early_warning_seconds": AMOUNT,
        "fits": BOOL,
    }


@record
class Sbatch(Record):
    """What the sbatch wrapper asks Slurm for."""

    job_name: str
    nodes: int
    ntasks: int
    ntasks_per_node: int = 1
    gpus_per_node: int | None = None
    account: str | None = None
    partition: str | None = None
    time_limit: str | None = None
    signal: str | None = None  # e.g. B:USR1@120
    directives: dict[str, str] = field(default_factory=dict)

    SPEC = {
        "job_name": STR,
        "nodes": AMOUNT,
        "ntasks": AMOUNT,
        "ntasks_per_node": AMOUNT,
        "gpus_per_node": s.Nullable(AMOUNT),
        "account": OPT_STR,
        "partition": OPT_STR,
        "time_limit": OPT_STR,
        "signal": OPT_STR,
        "directives": STR_MAP,
    }


@record
class Plan(Record):
    format: int = PLAN_FORMAT
    name: str
    recipe: str | None = None
    variant: str | None = None
    job_id: str
    local: bool = False
    log_dir: str
    nodes: dict[str, tuple[str, ...]]  # role (head, infra, benchmark, prefill, ...) -> node names
    allocation: tuple[str, ...]  # every node of the allocation, in order
    addresses: dict[str, str] = field(default_factory=dict)  # node -> address used for {node_ip}
    phases: tuple[str, ...]
    units: tuple[Unit, ...]  # in start order
    gate: str | None = None  # the unit whose readiness is the frontend gate
    hold: bool = False  # manual benchmark without terminal units: run until signalled
    teardown: TeardownBudget = field(default_factory=TeardownBudget)
    sbatch: Sbatch | None = None
    files: dict[str, str] = field(default_factory=dict)  # generated config files: path -> content
    warnings: tuple[str, ...] = ()
    # unit -> the srun line of its first attempt (Slurm plans: srtd plan, run); left out of the JSON while empty
    srun_lines: dict[str, str] = field(default_factory=dict)
    reporting: StatusReporting | None = None  # None: no status reporting (and no key in the JSON)
    port_offset: int = 0  # added to every port srtd chose (docs/topology.md); no key in the JSON while 0
    publishers: tuple[Publisher, ...] = ()  # run after the job in this order; left out of the JSON while empty
    power: PowerSampling | None = None  # srtd samples GPU power (telemetry.enabled); no key in the JSON without
    spares: tuple[str, ...] = ()  # held back for replacement (resources.spare_nodes); no key in JSON while empty
    preflight: bool = True  # check every node before launching (docs/nodes.md); in the JSON only when false

    SPEC = {
        "format": INT,
        "name": STR,
        "recipe": OPT_STR,
        "variant": OPT_STR,
        "job_id": STR,
        "local": BOOL,
        "log_dir": STR,
        "nodes": s.DictOf(STRS),
        "allocation": STRS,
        "addresses": STR_MAP,
        "phases": STRS,
        "units": TupleOf(RecordOf(Unit)),
        "gate": OPT_STR,
        "hold": BOOL,
        "teardown": RecordOf(TeardownBudget),
        "sbatch": s.Nullable(RecordOf(Sbatch)),
        "files": STR_MAP,
        "warnings": STRS,
        "srun_lines": STR_MAP,
        "reporting": s.Nullable(RecordOf(StatusReporting)),
        "port_offset": AMOUNT,
        "publishers": TupleOf(RecordOf(Publisher)),
        "power": s.Nullable(RecordOf(PowerSampling)),
        "spares": STRS,
        "preflight": BOOL,
    }
    # Plans without these keep the exact JSON they had before the fields existed.
    OMIT = {
        "srun_lines": {},
        "reporting": None,
        "port_offset": 0,
        "publishers": (),
        "power": None,
        "spares": (),
        "preflight": True,
    }

    def outside_log_dir(self) -> list[str]:
        """What the plan would write outside its log directory: one line per path (none, or a bug)."""
        logs = [(f"unit {u.name!r}: log", posixpath.join(self.log_dir, u.log)) for u in self.units]
        logs += [(f"publisher {p.name!r}: log", posixpath.join(self.log_dir, p.log)) for p in self.publishers]
        files = [("generated file", name) for name in self.files]
        return [
            f"{what} {path!r} is outside the log directory"
            for what, path in logs + files
            if not within(self.log_dir, path)
        ]

    def unit(self, name: str) -> Unit:
        for unit in self.units:
            if unit.name == name:
                return unit
        raise KeyError(name)

    def terminal_units(self) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if u.terminal)

    def to_json(self) -> dict[str, Any]:
        return self.as_json()

    def dumps(self) -> str:
        """Byte-stable JSON: same plan, same bytes."""
        return json.dumps(self.as_json(), indent=2, ensure_ascii=False) + "\n"

    def checked(self) -> Plan:
        """This plan, after checking it as `loads` checks a saved one (raises `ShapeError`)."""
        check_record(self)
        return self

    @classmethod
    def loads(cls, text: str | bytes) -> Plan:
        """A saved plan, checked: `ShapeError` says where and why not (bad JSON at no location)."""
        try:
            data = loads_bounded(text, PLAN_DEPTH, constants=True)  # a NaN is refused by its field
        except TooDeep as e:
            raise ShapeError((), str(e)) from None
        except ValueError as e:
            raise ShapeError((), f"Invalid JSON: {e}") from None
        return cls.load(data)
