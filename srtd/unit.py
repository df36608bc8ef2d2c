"""The plan's data types: `Unit`, `Plan` and what they carry.

This module is the bottom layer of srtd: it imports nothing of srtd's.  Engines,
frontends and service kinds produce `Unit`s; the plan builder assembles a `Plan`;
the supervisor and the launchers read them and nothing else.  The JSON form of a
`Plan` (`Plan.to_json`) is a documented contract (docs/plan.md): fields are added,
never renamed or re-typed without bumping `PLAN_FORMAT`.
"""

from __future__ import annotations

import posixpath
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from srtd._files import within

PLAN_FORMAT = 1


_UNSAFE_NAME = re.compile(r"[/\x00-\x1f\x7f]|\.\.|^\.?$")


def unsafe_name(name: str) -> bool:
    """Whether a name that becomes a path component (a unit, a job id) could leave its directory."""
    return bool(_UNSAFE_NAME.search(name))


class _Frozen(BaseModel):
    # A saved plan.json is read back as it is: no number in it may be NaN or infinite.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# The plan's kinds of number.  A saved plan with a negative timeout or a zero interval is
# refused when read (`srtd run PLAN.json`, exit 2), never run into a busy loop or a crash.
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # a duration, a timeout
Interval = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a period between two tries
Amount = Annotated[int, Field(ge=0)]  # a count, an index, a tier
Port = Annotated[int, Field(ge=0, le=65535)]


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


class Edge(_Frozen):
    unit: str
    condition: Condition = Condition.READY


# --------------------------------------------------------------------------- probes


class TcpProbe(_Frozen):
    """Ready when `port` on `node` accepts a TCP connection."""

    type: Literal["tcp"] = "tcp"
    node: str
    port: Port


class HttpProbe(_Frozen):
    """Ready when GET http://<node>:<port><path> answers `status`."""

    type: Literal["http"] = "http"
    node: str
    port: Port
    path: str = "/health"
    status: int = 200


class LogProbe(_Frozen):
    """Ready when a complete line of the unit's log matches `pattern`."""

    type: Literal["log"] = "log"
    pattern: str


class FileProbe(_Frozen):
    """Ready when `path` exists (a file the unit writes on shared storage, seen from `node`)."""

    type: Literal["file"] = "file"
    node: str
    path: str


class Count(_Frozen):
    """One way to read a number out of a JSON health document.

    `field` reads a number at a dotted path (`stats.prefill_count`).  `items` counts
    the entries of the list at a dotted path (`instances`) whose fields equal every
    value in `where` (a list value means "any of these").  Exactly one is set.
    """

    field: str | None = None
    items: str | None = None
    where: dict[str, str | list[str]] = Field(default_factory=dict)


class WorkerCountProbe(_Frozen):
    """The frontend gate: a JSON document that counts registered workers.

    Ready when GET http://<node>:<port><path> answers `status` with a JSON body in
    which the sum of the `prefill` counts is at least `expect_prefill` and the sum
    of the `decode` counts is at least `expect_decode`.  The frontend that owns the
    gate writes the counting rules; the supervisor only evaluates them.
    """

    type: Literal["workers"] = "workers"
    node: str
    port: Port
    path: str
    status: int = 200
    prefill: tuple[Count, ...] = ()
    decode: tuple[Count, ...] = ()
    expect_prefill: Amount = 0
    expect_decode: Amount = 0


Probe = Annotated[TcpProbe | HttpProbe | LogProbe | FileProbe | WorkerCountProbe, Field(discriminator="type")]


class Readiness(_Frozen):
    probe: Probe
    timeout_seconds: Seconds = 120.0
    interval_seconds: Interval = 2.0


class Liveness(_Frozen):
    """Is a ready unit still alive?  Checked once per period, only while it is ready.

    `probe` (tcp, http, or log: a heartbeat line at least once per period) and
    `log_silence_seconds` (no new line at all for that long) each make a period
    fail; `failure_threshold` consecutive failed periods end the attempt as
    `unhealthy`, and the restart policy and `critical` decide as for a crash.
    `timeout_seconds` bounds one tcp/http check.  At least one of `probe` and
    `log_silence_seconds` is set.
    """

    probe: Annotated[TcpProbe | HttpProbe | LogProbe, Field(discriminator="type")] | None = None
    period_seconds: Interval = 10.0
    timeout_seconds: Seconds = 5.0
    failure_threshold: Amount = 3
    log_silence_seconds: Seconds | None = None


# --------------------------------------------------------------------------- restart


class RestartMode(StrEnum):
    NEVER = "never"
    ON_FAILURE = "on-failure"
    ALWAYS = "always"


class Restart(_Frozen):
    """How a unit is relaunched when it exits.  Counts are per unit over the job."""

    policy: RestartMode = RestartMode.NEVER
    max_restarts: Amount = 3
    backoff_seconds: Seconds = 10.0
    max_backoff_seconds: Seconds = 300.0
    # After this long running cleanly (ready, if it has a probe) the backoff starts
    # again from `backoff_seconds`.  `max_restarts` still counts over the whole job.
    stable_seconds: Seconds = 300.0

    def restarts_on(self, exit_code: int | None) -> bool:
        if self.policy is RestartMode.ALWAYS:
            return True
        if self.policy is RestartMode.ON_FAILURE:
            return exit_code != 0
        return False

    def backoff(self, restart_number: int) -> float:
        """Delay before relaunch number `restart_number` (1-based): doubling, capped."""
        # The exponent is capped: 2**1024 does not fit a float, and 2**64 times any
        # backoff is past every cap already.
        delay = self.backoff_seconds * 2 ** min(max(restart_number - 1, 0), 64)
        return float(min(delay, self.max_backoff_seconds))


# --------------------------------------------------------------------------- launch knobs


class Container(_Frozen):
    """A container image and what is mounted into it (pyxis/enroot semantics)."""

    image: str
    mounts: dict[str, str] = Field(default_factory=dict)  # host path -> container path
    remap_root: bool = False


# The srun flags srtd derives from the unit and its step bookkeeping (which job, which
# nodes, which log, which step name, which container instance): an `srun_options` entry
# may not set them, since the line would then say two different things.  Every other
# flag srtd writes (`--mpi`, `--cpu-bind`, `--container-remap-root`, ...) an option
# replaces.
_STEP_FLAGS = ("jobid", "overlap", "nodes", "ntasks", "nodelist", "output", "open-mode", "job-name", "export")
SRUN_OWNED_FLAGS = frozenset((*_STEP_FLAGS, "container-image", "container-name"))


class Srun(_Frozen):
    """Knobs the Slurm launcher turns into srun flags; the local launcher ignores them."""

    ntasks: Amount = 1
    mpi: str | None = None
    oversubscribe: bool = False
    cpus_per_task: Amount | None = None
    cpu_bind: str | None = None
    het_group: Amount | None = None
    options: dict[str, str] = Field(default_factory=dict)  # --key=value, "" -> --key
    export_env: dict[str, str] = Field(default_factory=dict)  # srun --export=ALL,K=V
    shell: bool = True  # False: run argv bare (shell-less images); env goes through export_env


# --------------------------------------------------------------------------- results


class ResultsSpec(_Frozen):
    """Where a benchmark unit leaves what it measured, and how srtd reads it (docs/results.md).

    `reader` names a row of `srtd.results`' reader table (the supervisor never compares
    it); `path` is a file or a directory, absolute or relative to the log directory;
    `gpus` is the job's serving GPU count (for throughput per GPU, 0 when unknown);
    `gate` says whether an empty measurement fails the job (`benchmark.accept_empty`
    turns it off).
    """

    reader: str
    path: str
    gpus: Amount = 0
    gate: bool = True


# --------------------------------------------------------------------------- the unit


class Unit(_Frozen):
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
    env: dict[str, str] = Field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    cwd: str | None = None
    container: Container | None = None
    srun: Srun = Field(default_factory=Srun)
    log: str  # path of its log file
    ports: dict[str, int] = Field(default_factory=dict)  # every listener it binds
    after: tuple[Edge, ...] = ()
    readiness: Readiness | None = None
    liveness: Liveness | None = None  # in the JSON only when set (plans before it stay byte-identical)
    fatal_patterns: tuple[str, ...] = ()
    echo: bool = False  # mirror its log lines on srtd's console (a benchmark's `stream_output`)
    restart: Restart = Field(default_factory=Restart)
    critical: bool = True
    terminal: bool = False
    tier: Amount = 0  # teardown order: 0 first, then 1, then 2
    terminate_timeout: Seconds = 30.0
    run_timeout: Seconds | None = None  # one-shot units (clone, build) are killed after this
    group: str | None = None  # units of one group restart together (a multi-node worker)
    role: str | None = None
    index: Amount | None = None
    implied_by: str | None = None  # why an implicit service is in the plan
    results: ResultsSpec | None = None  # a benchmark's measurements; in the JSON only when set
    # launched by the job's teardown, after every tier is down, instead of at start (a host
    # teardown step); in the JSON only when true
    on_teardown: bool = False
    on_disruption: Literal["restart", "fail"] = "restart"  # a terminal unit across a replacement; JSON: when fail

    @property
    def node(self) -> str:
        return self.nodes[0]

    @model_serializer(mode="wrap")
    def _omit_unset_liveness(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key, unset in (("liveness", None), ("results", None), ("on_teardown", False), ("on_disruption", "restart")):
            if key in data and data[key] == unset:
                del data[key]
        return data


# --------------------------------------------------------------------------- result publishers


class Publisher(_Frozen):
    """A command run on srtd's host after a job whose results passed the gate (docs/results.md).

    Plain data: srtd writes the results document to its stdin and keeps its output in
    `log` (relative to the log directory); it is killed after `timeout_seconds`.
    """

    name: str
    argv: tuple[str, ...]
    timeout_seconds: Seconds = 60.0
    log: str


# --------------------------------------------------------------------------- power sampling


class PowerEndpoint(_Frozen):
    """One GPU exporter srtd samples: its node and its metrics URL."""

    node: str
    url: str


class PowerSampling(_Frozen):
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
    interval_seconds: Interval = 1.0
    request_timeout_seconds: Seconds = 2.0
    required: bool = False


# --------------------------------------------------------------------------- status reporting


class StatusReporting(_Frozen):
    """Where the job's lifecycle is reported (srt-slurm's status collector contract).

    Plain data: the collectors' base URLs and the *name* of the variable that holds
    the bearer token, never the token itself (docs/plan.md).
    """

    endpoints: tuple[str, ...]  # base URLs, trailing "/" dropped, no duplicates
    token_env: str = "SRTCTL_STATUS_TOKEN"  # the environment variable with the bearer token
    job_id_prefix: str = ""  # the collector knows the job as prefix + job id
    cluster: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)  # sent with the first PUT of a run
    # also send the journal's events to srtd's extension route: True always, False never, None (the
    # default) to each collector whose `/api/health` says it takes them (an srtd collector)
    units: bool | None = None

    @model_serializer(mode="wrap")
    def _omit_units_default(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Plans that leave `units` unset keep the exact JSON they had before `units` existed.
        data: dict[str, Any] = handler(self)
        if data.get("units") is None:
            data.pop("units", None)
        return data


# --------------------------------------------------------------------------- the plan


class TeardownBudget(_Frozen):
    """Σ over tiers of the slowest unit of the tier, against what Slurm allows."""

    tiers: dict[str, float] = Field(default_factory=dict)  # tier -> largest terminate timeout
    total_seconds: Seconds = 0.0
    kill_wait_seconds: Seconds = 30.0
    early_warning_seconds: Amount = 0  # sbatch --signal=B:USR1@<s>
    fits: bool = True


class Sbatch(_Frozen):
    """What the sbatch wrapper asks Slurm for."""

    job_name: str
    nodes: Amount
    ntasks: Amount
    ntasks_per_node: Amount = 1
    gpus_per_node: Amount | None = None
    account: str | None = None
    partition: str | None = None
    time_limit: str | None = None
    signal: str | None = None  # e.g. B:USR1@120
    directives: dict[str, str] = Field(default_factory=dict)


class Plan(_Frozen):
    format: int = PLAN_FORMAT
    name: str
    recipe: str | None = None
    variant: str | None = None
    job_id: str
    local: bool = False
    log_dir: str
    nodes: dict[str, tuple[str, ...]]  # role (head, infra, benchmark, prefill, ...) -> node names
    allocation: tuple[str, ...]  # every node of the allocation, in order
    addresses: dict[str, str] = Field(default_factory=dict)  # node -> address used for {node_ip}
    phases: tuple[str, ...]
    units: tuple[Unit, ...]  # in start order
    gate: str | None = None  # the unit whose readiness is the frontend gate
    hold: bool = False  # manual benchmark without terminal units: run until signalled
    teardown: TeardownBudget = Field(default_factory=TeardownBudget)
    sbatch: Sbatch | None = None
    files: dict[str, str] = Field(default_factory=dict)  # generated config files: path -> content
    warnings: tuple[str, ...] = ()
    # unit -> the srun line of its first attempt (Slurm plans: srtd plan, run); left out of the JSON while empty
    srun_lines: dict[str, str] = Field(default_factory=dict)
    reporting: StatusReporting | None = None  # None: no status reporting (and no key in the JSON)
    port_offset: Amount = 0  # added to every port srtd chose (docs/topology.md); no key in the JSON while 0
    publishers: tuple[Publisher, ...] = ()  # run after the job in this order; left out of the JSON while empty
    power: PowerSampling | None = None  # srtd samples GPU power (telemetry.enabled); no key in the JSON without
    spares: tuple[str, ...] = ()  # held back for replacement (resources.spare_nodes); no key in JSON while empty
    preflight: bool = True  # check every node before launching (docs/nodes.md); in the JSON only when false

    @model_serializer(mode="wrap")
    def _without_empty_optionals(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Plans without these keep the exact JSON they had before the fields existed.
        data: dict[str, Any] = handler(self)
        for key in ("publishers", "srun_lines"):
            if not data.get(key):
                data.pop(key, None)
        if not data.get("port_offset"):
            data.pop("port_offset", None)
        for key in ("reporting", "power"):
            if data.get(key, "") is None:
                del data[key]
        if not data.get("spares"):
            data.pop("spares", None)
        if data.get("preflight") is True:
            del data["preflight"]
        return data

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
        return self.model_dump(mode="json")

    def dumps(self) -> str:
        """Byte-stable JSON: same plan, same bytes."""
        return self.model_dump_json(indent=2) + "\n"

    @classmethod
    def loads(cls, text: str) -> Plan:
        return cls.model_validate_json(text)
