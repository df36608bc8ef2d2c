"""The knobs of a unit: its probes, its restart policy, its container, srun and results.

Part of the plan's data types (`srtd.unit` is their face, and every srtd module takes them
from there); kept apart only to keep each module small.  Each is a frozen record with a
`SPEC` per field (srtd/_record.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from enum import StrEnum
from typing import Literal

from srtd import _shape as s
from srtd._record import Either, EnumOf, LaxBool, LaxInt, LaxNum, Record, RecordOf, Tagged, TupleOf, record
from srtd._record import Literal as Tag

# The plan's kinds of number.  A saved plan with a negative timeout or a zero interval is
# refused when read (`srtd run PLAN.json`, exit 2), never run into a busy loop or a crash;
# a number in a saved plan is never NaN or infinite.
SECONDS = LaxNum(ge=0)  # a duration, a timeout
INTERVAL = LaxNum(gt=0)  # a period between two tries
AMOUNT = LaxInt(ge=0)  # a count, an index, a tier
PORT = LaxInt(ge=0, le=65535)
STR, BOOL, INT = s.Str(), LaxBool(), LaxInt()
OPT_STR = s.Nullable(STR)
STRS = TupleOf(STR)
STR_MAP = s.DictOf(STR)


# --------------------------------------------------------------------------- probes


@record
class TcpProbe(Record):
    """Ready when `port` on `node` accepts a TCP connection."""

    type: Literal["tcp"] = "tcp"
    node: str
    port: int

    SPEC = {"type": Tag("tcp"), "node": STR, "port": PORT}


@record
class HttpProbe(Record):
    """Ready when GET http://<node>:<port><path> answers `status`."""

    type: Literal["http"] = "http"
    node: str
    port: int
    path: str = "/health"
    status: int = 200

    SPEC = {"type": Tag("http"), "node": STR, "port": PORT, "path": STR, "status": INT}


@record
class LogProbe(Record):
    """Ready when a complete line of the unit's log matches `pattern`."""

    type: Literal["log"] = "log"
    pattern: str

    SPEC = {"type": Tag("log"), "pattern": STR}


@record
class FileProbe(Record):
    """Ready when `path` exists (a file the unit writes on shared storage, seen from `node`)."""

    type: Literal["file"] = "file"
    node: str
    path: str

    SPEC = {"type": Tag("file"), "node": STR, "path": STR}


@record
class Count(Record):
    """One way to read a number out of a JSON health document.

    `field` reads a number at a dotted path (`stats.prefill_count`).  `items` counts
    the entries of the list at a dotted path (`instances`) whose fields equal every
    value in `where` (a list value means "any of these").  Exactly one is set.
    """

    field: str | None = None
    items: str | None = None
    # (`field` is a field's name here: the dataclasses function goes by its module)
    where: dict[str, str | list[str]] = dataclasses.field(default_factory=dict)

    SPEC = {"field": OPT_STR, "items": OPT_STR, "where": s.DictOf(Either({"str": STR, "list[str]": s.ListOf(STR)}))}


@record
class WorkerCountProbe(Record):
    """The frontend gate: a JSON document that counts registered workers.

    Ready when GET http://<node>:<port><path> answers `status` with a JSON body in
    which the sum of the `prefill` counts is at least `expect_prefill` and the sum
    of the `decode` counts is at least `expect_decode`.  The frontend that owns the
    gate writes the counting rules; the supervisor only evaluates them.
    """

    type: Literal["workers"] = "workers"
    node: str
    port: int
    path: str
    status: int = 200
    prefill: tuple[Count, ...] = ()
    decode: tuple[Count, ...] = ()
    expect_prefill: int = 0
    expect_decode: int = 0

    SPEC = {
        "type": Tag("workers"),
        "node": STR,
        "port": PORT,
        "path": STR,
        "status": INT,
        "prefill": TupleOf(RecordOf(Count)),
        "decode": TupleOf(RecordOf(Count)),
        "expect_prefill": AMOUNT,
        "expect_decode": AMOUNT,
    }


Probe = TcpProbe | HttpProbe | LogProbe | FileProbe | WorkerCountProbe
PROBE = Tagged(
    "type", {"tcp": TcpProbe, "http": HttpProbe, "log": LogProbe, "file": FileProbe, "workers": WorkerCountProbe}
)


@record
class Readiness(Record):
    probe: Probe
    timeout_seconds: float = 120.0
    interval_seconds: float = 2.0

    SPEC = {"probe": PROBE, "timeout_seconds": SECONDS, "interval_seconds": INTERVAL}


@record
class Liveness(Record):
    """Is a ready unit still alive?  Checked once per period, only while it is ready.

    `probe` (tcp, http, or log: a heartbeat line at least once per period) and
    `log_silence_seconds` (no new line at all for that long) each make a period
    fail; `failure_threshold` consecutive failed periods end the attempt as
    `unhealthy`, and the restart policy and `critical` decide as for a crash.
    `timeout_seconds` bounds one tcp/http check.  At least one of `probe` and
    `log_silence_seconds` is set.
    """

    probe: TcpProbe | HttpProbe | LogProbe | None = None
    period_seconds: float = 10.0
    timeout_seconds: float = 5.0
    failure_threshold: int = 3
    log_silence_seconds: float | None = None

    SPEC = {
        "probe": s.Nullable(Tagged("type", {"tcp": TcpProbe, "http": HttpProbe, "log": LogProbe})),
        "period_seconds": INTERVAL,
        "timeout_seconds": SECONDS,
        "failure_threshold": AMOUNT,
        "log_silence_seconds": s.Nullable(SECONDS),
    }


# --------------------------------------------------------------------------- restart


class RestartMode(StrEnum):
    NEVER = "never"
    ON_FAILURE = "on-failure"
    ALWAYS = "always"


@record
class Restart(Record):
    """How a unit is relaunched when it exits.  Counts are per unit over the job."""

    policy: RestartMode = RestartMode.NEVER
    max_restarts: int = 3
    backoff_seconds: float = 10.0
    max_backoff_seconds: float = 300.0
    # After this long running cleanly (ready, if it has a probe) the backoff starts
    # again from `backoff_seconds`.  `max_restarts` still counts over the whole job.
    stable_seconds: float = 300.0

    SPEC = {
        "policy": EnumOf(RestartMode),
        "max_restarts": AMOUNT,
        "backoff_seconds": SECONDS,
        "max_backoff_seconds": SECONDS,
        "stable_seconds": SECONDS,
    }

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


@record
class Container(Record):
    """A container image and what is mounted into it (pyxis/enroot semantics)."""

    image: str
    mounts: dict[str, str] = field(default_factory=dict)  # host path -> container path
    remap_root: bool = False

    SPEC = {"image": STR, "mounts": STR_MAP, "remap_root": BOOL}


# The srun flags srtd derives from the unit and its step bookkeeping (which job, which
# nodes, which log, which step name, which container instance): an `srun_options` entry
# may not set them, since the line would then say two different things.  Every other
# flag srtd writes (`--mpi`, `--cpu-bind`, `--container-remap-root`, ...) an option
# replaces.
_STEP_FLAGS = ("jobid", "overlap", "nodes", "ntasks", "nodelist", "output", "open-mode", "job-name", "export")
SRUN_OWNED_FLAGS = frozenset((*_STEP_FLAGS, "container-image", "container-name"))


@record
class Srun(Record):
    """Knobs the Slurm launcher turns into srun flags; the local launcher ignores them."""

    ntasks: int = 1
    mpi: str | None = None
    oversubscribe: bool = False
    cpus_per_task: int | None = None
    cpu_bind: str | None = None
    het_group: int | None = None
    options: dict[str, str] = field(default_factory=dict)  # --key=value, "" -> --key
    export_env: dict[str, str] = field(default_factory=dict)  # srun --export=ALL,K=V
    shell: bool = True  # False: run argv bare (shell-less images); env goes through export_env

    SPEC = {
        "ntasks": AMOUNT,
        "mpi": OPT_STR,
        "oversubscribe": BOOL,
        "cpus_per_task": s.Nullable(AMOUNT),
        "cpu_bind": OPT_STR,
        "het_group": s.Nullable(AMOUNT),
        "options": STR_MAP,
        "export_env": STR_MAP,
        "shell": BOOL,
    }


# --------------------------------------------------------------------------- results


@record
class ResultsSpec(Record):
    """Where a benchmark unit leaves what it measured, and how srtd reads it (docs/results.md).

    `reader` names a row of `srtd.results`' reader table (the supervisor never compares
    it); `path` is a file or a directory, absolute or relative to the log directory;
    `gpus` is the job's serving GPU count (for throughput per GPU, 0 when unknown);
    `gate` says whether an empty measurement fails the job (`benchmark.accept_empty`
    turns it off).
    """

    reader: str
    path: str
    gpus: int = 0
    gate: bool = True

    SPEC = {"reader": STR, "path": STR, "gpus": AMOUNT, "gate": BOOL}
