"""Cluster settings: `srtslurm.yaml` plus `SRTD_*` environment overrides.

What differs from one cluster to the next (aliases, defaults for the Slurm job,
the network interface, the container runtime, where binaries live) is here and
read once.  The file is found by `--cluster-config`, `$SRTD_CLUSTER_CONFIG`,
`./srtslurm.yaml`, `~/.config/srtd/srtslurm.yaml`, in that order; no file at
all is fine (every setting has a default).  An unknown key is an error that
names it: a typo must not silently drop the cluster's defaults.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from srtd._yaml import Positions, parse_text, read_file
from srtd.errors import ClusterConfigError, RecipeError
from srtd.layout import DEFAULT_LAYOUT, LogLayout
from srtd.recipe import RULES_ERROR, HostSetupConfig, ReportingConfig, Rules, SlurmTime, SrunOptions

CONFIG_ENV = "SRTD_CLUSTER_CONFIG"
# SRTD_* variables that are not settings: srtd sets them in every unit's
# environment, and the test suite has its own namespace.
RUNTIME_ENV = frozenset(
    {
        CONFIG_ENV,
        "SRTD_JOB_ID",
        "SRTD_LOG_DIR",
        "SRTD_UNIT",
        "SRTD_ATTEMPT",
        "SRTD_REGEN_GOLDEN",
        "SRTD_RUNTIME_DIR",  # where attach sockets live (docs/attach.md)
        "SRTD_ATTACH_QUEUE",  # per-client queue of the attach server
        # read by their own parts of srtd, documented where those are
        "SRTD_LOG_WATCH",  # how units' logs are watched (docs/supervisor.md)
        "SRTD_COLLECTOR_TOKEN",  # the collector's write token (docs/collector.md)
        "SRTD_COLLECTOR_READ_TOKEN",  # the collector's read token (docs/collector.md)
        "SRTD_DYNAMO_STACK",  # the Dynamo test stack's directory (docs/dynamo-local.md)
        "SRTD_NODE",  # the node a preflight GPU query runs for (docs/nodes.md)
    }
)
RESERVED_PREFIX = "SRTD_TEST_"
SHOWN_INPUT = 100  # characters of a refused value shown in its error
FILE_NAME = "srtslurm.yaml"


class Cluster(BaseModel):
    """Settings of the cluster srtd runs on.  `load_cluster` reads them; every field can be set as `SRTD_<FIELD>`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str | None = None
    """The cluster's name, for reports."""
    default_account: str | None = None
    """Slurm account when the recipe sets none."""
    default_partition: str | None = None
    """Slurm partition when the recipe sets none."""
    default_time_limit: SlurmTime | None = None
    """Slurm time limit (HH:MM:SS) when the recipe sets none."""
    default_gpu_type: str | None = None
    """GPU type when the recipe sets none."""
    gpus_per_node: Annotated[int, Field(ge=1, le=1024)] | None = None
    """GPUs per node when the recipe sets none."""
    network_interface: str | None = None
    """Interface whose address workers advertise; unset: the node's hostname."""
    container_runtime: Literal["pyxis", "none"] = "pyxis"
    """`pyxis` runs steps in containers (srun --container-image); `none` runs on the bare host."""
    visible_devices_env: str = "CUDA_VISIBLE_DEVICES"
    """Variable that pins a worker's GPUs (ROCR_VISIBLE_DEVICES on AMD)."""
    containers: dict[str, str] = Field(default_factory=dict)
    """Container aliases: name -> image."""
    model_paths: dict[str, str] = Field(default_factory=dict)
    """Model aliases: name -> weights directory."""
    default_mounts: dict[str, str] = Field(default_factory=dict)
    """Mounts of every container: host path -> container path."""
    default_bash_preamble: str | None = None
    """Shell run first in every step's wrapper (e.g. `ulimit -n 1048576`)."""
    default_srun_options: SrunOptions = Field(default_factory=dict)
    """srun options of every step, under the recipe's."""
    default_sbatch_directives: dict[str, str] = Field(default_factory=dict)
    """Extra #SBATCH lines, under the recipe's."""
    use_gpus_per_node_directive: bool = True
    """Write `#SBATCH --gpus-per-node`."""
    binaries: dict[str, str] = Field(default_factory=dict)
    """Executables of typed services by kind (`etcd: /usr/bin/etcd`, `nats: /usr/sbin/nats-server`), and
    `aiperf`: the aiperf benchmark's command (default `aiperf`; may be `python3 -m aiperf`)."""
    kill_wait_seconds: Annotated[int, Field(ge=0, le=65533)] = 30
    """Slurm's KillWait: how long steps get between SIGTERM and SIGKILL when Slurm ends the job."""
    srun_mpi: str | None = None
    """The MPI plugin of every step that asks srun for one (srtctl's engines and frontends ask
    for `pmix`); `none` or `pmi2` on clusters without PMIx.  Unset: what each row asks for."""
    shared_port_space: bool = False
    """Nodes share one host's ports (several Slurm nodes on one machine): no two listeners
    of the job get the same port.  srtd run also turns it on when two nodes of the
    allocation resolve to one host."""
    port_offset: Annotated[int, Field(ge=0)] | Literal["auto"] | None = None
    """Added to every port srtd chooses (docs/topology.md).  A number pins it; `auto` derives
    it from the Slurm job id, `(id % 100) * 10`, for clusters whose jobs share nodes.  Unset:
    0 on Slurm; a local `srtd run` takes the first free block of ports."""
    sweep_max_running: Annotated[int, Field(ge=1, le=100_000)] = 8
    """`srtd sweep`: at most this many of a campaign's jobs in the queue at once (`--max-running`
    overrides it; docs/sweep.md)."""
    node_check_interval_seconds: float = Field(default=3.0, ge=0)
    """How often srtd run connects to the slurmd of every node of the allocation to see that it is
    still there (docs/failures.md); 0 turns the check off.  Each connect costs one error line in slurmd's log."""
    node_lost_seconds: float = Field(default=10.0, gt=0)
    """A node none of whose slurmd connects succeeded for this long is lost: its units fail with
    `node NODE lost (...)`.  Detection within this + the check interval + 2 s (15 s by default)."""
    spare_nodes: Annotated[int, Field(ge=0, le=64)] = 0
    """Spare nodes of every job whose recipe sets no `resources.spare_nodes` (docs/nodes.md)."""
    preflight_seconds: float = Field(default=60.0, gt=0)
    """The time budget of the per-node check before the units launch, all nodes at once (docs/nodes.md)."""
    gpu_query_command: str = "nvidia-smi"
    """The program (and leading arguments, split as a shell would but never run by one) that answers
    nvidia-smi's `--query-gpu` and `--query-compute-apps` queries for preflight."""
    early_warning_seconds: Annotated[int, Field(ge=1, le=65535)] | None = None
    """`sbatch --signal=B:USR1@N`; unset: the teardown budget plus a minute."""
    benchmark_scripts: str | None = None
    """Host directory of srt-slurm's benchmark scripts, mounted at /srtctl-benchmarks."""
    output_root: str = "outputs"
    """Where log directories go when the recipe sets no `output.log_dir`."""
    log_layout: LogLayout = DEFAULT_LAYOUT
    """`split`: worker logs under `workers/`, service logs under `services/logs/`, telemetry under
    `telemetry/` (srt-slurm's newest layout); `flat`: every log at the top of the log directory."""
    reporting: ReportingConfig | None = None
    """Every job's status collectors and log upload (`reporting.status`, `reporting.s3`, as in a recipe); a
    recipe's own fields win over these, field by field."""
    default_host_setup: HostSetupConfig | None = None
    """Host hooks of every job (`host_setup`, as in a recipe); a recipe that writes `host_setup` replaces them."""

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    def origin(self, name: str) -> str | None:
        """Where setting `name` was given (`srtslurm.yaml:3:16`, `SRTD_GPUS_PER_NODE`), None for its default."""
        return self._origins.get(name)

    @model_validator(mode="after")
    def _one_line_values(self) -> Cluster:
        # Values that become #SBATCH lines, srun options or a variable's name: refused here,
        # at their line, rather than later where the recipe being planned would be blamed.
        rules = Rules()
        for name in ("cluster", "default_account", "default_partition", "default_gpu_type"):
            value = getattr(self, name)
            if value is not None and _multiline(value):
                rules.add(name, f"must be one line, got {value!r}")
        for name in ("default_sbatch_directives", "default_srun_options"):
            for key, value in getattr(self, name).items():
                if not _OPTION.fullmatch(key):
                    rules.add(f"{name}.{key}", "not an option name (letters, digits and `-`)")
                elif _multiline(value):
                    rules.add(f"{name}.{key}", f"must be one line, got {value!r}")
        if not _VARIABLE.fullmatch(self.visible_devices_env):
            rules.add("visible_devices_env", f"not an environment variable name, got {self.visible_devices_env!r}")
        rules.check()
        return self


_OPTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _multiline(value: str) -> bool:
    return "\n" in value or "\r" in value


def find_cluster_file(explicit: str | Path | None = None) -> Path | None:
    """The settings file to read, or None when there is none."""
    if explicit is not None:
        return Path(explicit)
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return Path(from_env)
    for candidate in (Path.cwd() / FILE_NAME, Path.home() / ".config" / "srtd" / FILE_NAME):
        if candidate.is_file():
            return candidate
    return None


def load_cluster(explicit: str | Path | None = None) -> tuple[Cluster, Path | None]:
    """The cluster settings and the file they came from (None: defaults and environment only)."""
    path = find_cluster_file(explicit)
    data: dict[str, Any] = {}
    positions = Positions(None)
    if path is not None:
        try:
            parsed, positions = parse_text(read_file(path, what="cluster settings file"), str(path))
        except RecipeError as err:
            raise ClusterConfigError(str(err)) from None
        if parsed is None:
            parsed = {}
        if not isinstance(parsed, dict):
            raise ClusterConfigError(f"{path}:1: the cluster settings must be a YAML mapping")
        data = parsed
        _check_keys(data, positions)
    _check_env(os.environ)
    try:
        cluster = Cluster(**_merged(data, _from_env(os.environ)))
    except ValidationError as err:
        raise ClusterConfigError(_describe(err, positions, path)) from None
    for name in Cluster.model_fields:
        variable = f"SRTD_{name.upper()}"
        if variable in os.environ or any(v.startswith(variable + "__") for v in os.environ):
            cluster._origins[name] = variable
        elif name in data:
            where = positions.locate((name,))
            cluster._origins[name] = f"{path}:{where[0]}:{where[1]}" if where else str(path)
    return cluster, path


# --------------------------------------------------------------------------- SRTD_* variables
# Read here as pydantic-settings read them when srtd used it (its import alone cost `validate`
# and `plan` 0.6 s): names in any case; `SRTD_<NAME>__<KEY>` sets one key of a mapping or
# section; a mapping, sequence or section is written as JSON, which a setting that may also be
# unset (`reporting`) takes as plain text when it is not JSON, for its validation to refuse.
# The environment wins over the file key by key (`_merged`), as pydantic-settings merged them.


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings the SRTD_* variables give, as `Cluster` arguments."""
    env = {name.lower(): value for name, value in environ.items()}
    values: dict[str, Any] = {}
    for name, info in Cluster.model_fields.items():
        variable = f"srtd_{name}"
        kind = _json_kind(info.annotation)
        if kind is None:  # a scalar: its text, which validation converts
            if variable in env:
                values[name] = env[variable]
            continue
        try:
            if variable not in env:
                value = _exploded(env, variable + "__", info.annotation) or None
            # the nested variables add to a mapping; they are not read beside text or a list
            elif isinstance(value := _json(env[variable], lenient=kind), dict):
                value = _merged(value, _exploded(env, variable + "__", info.annotation))
        except ValueError:
            message = 'not valid JSON for this setting (a mapping is written as {"key": "value"})'
            raise ClusterConfigError(f"SRTD_{name.upper()}: {message}") from None
        if value is not None:  # JSON `null` leaves the setting as the file has it
            values[name] = _field_names(info.annotation, value)
    return values


def _exploded(env: Mapping[str, str], prefix: str, annotation: Any) -> dict[str, Any]:
    """The `<prefix><KEY>[__<KEY>...]` variables as one mapping, each value read as the type at its key."""
    result: dict[str, Any] = {}
    for variable, value in env.items():
        if not variable.startswith(prefix):
            continue
        *keys, last = variable[len(prefix) :].split("__")
        place: Any = result
        member: tuple[Any, bool] | None = (annotation, True)
        for key in keys:
            member = _member(member[0], key) if member else None
            if isinstance(place, dict):
                place = place.setdefault(key, {})
        member = _member(member[0], last) if member else None
        if value and member is None and _is_mapping(annotation):
            value = _json(value, lenient=True)  # a key the mapping's type says nothing about
        elif value and member is not None:
            value = _member_value(value, *member)
        if isinstance(place, dict):  # not under a key another variable gave as text
            place[last] = value
    return result


def _member(annotation: Any, key: str) -> tuple[Any, bool] | None:
    """The type `key` has inside a value of `annotation`, and whether it is a section's field."""
    if _is_mapping(annotation):
        args = get_args(annotation)
        return (args[-1], False) if args else None
    for arg in get_args(annotation):  # a union's members, a sequence's items, Annotated's type
        if found := _member(arg, key):
            return found
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, info in annotation.model_fields.items():
            if key in (name.lower(), (info.alias or name).lower()):
                return info.annotation, True
    return None


def _member_value(value: str, annotation: Any, field: bool) -> Any:
    """A nested variable's value, where its key has type `annotation`."""
    lenient = _json_kind(annotation)
    if field:  # a section's field: as the field itself would be read
        return value if lenient is None else _json(value, lenient)
    if _complex(annotation):
        return _json(value, lenient=True)
    if lenient:  # a mapping's value that may be text or JSON: JSON only when a list or a mapping
        decoded = _json(value, lenient=True)
        return decoded if isinstance(decoded, (list, dict)) else value
    return value


def _json_kind(annotation: Any) -> bool | None:
    """None: text; False: JSON; True: JSON if it is JSON (a union of text and a structure)."""
    if _complex(annotation):
        return False
    if get_origin(annotation) in (Union, types.UnionType) and any(map(_complex, get_args(annotation))):
        return True
    return None


def _complex(annotation: Any) -> bool:
    """A mapping, sequence or section: written as JSON."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    kind = get_origin(annotation) or annotation
    return (
        isinstance(kind, type)
        and not issubclass(kind, (str, bytes))
        and issubclass(kind, (BaseModel, Mapping, Sequence, Set))
    )


def _is_mapping(annotation: Any) -> bool:
    kind = get_origin(annotation) or annotation
    return isinstance(kind, type) and issubclass(kind, dict)


def _json(text: str, lenient: bool) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        if lenient:
            return text
        raise


def _field_names(annotation: Any, value: Any) -> Any:
    """A section's keys given in any case, as the section's field names (its aliases where it has them)."""
    args = get_args(annotation)
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        annotation = next(arg for arg in args if arg is not type(None))
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict)):
        return value
    fields = {
        (info.alias or name).lower(): (info.alias or name, info) for name, info in annotation.model_fields.items()
    }
    renamed = {}
    for key, item in value.items():
        if key.lower() in fields:
            name, info = fields[key.lower()]
            renamed[name] = _field_names(info.annotation, item)
        else:
            renamed[key] = item
    return renamed


def _merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """`base` with `update`'s values, mappings merged key by key."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _check_keys(data: dict[str, Any], positions: Positions) -> None:
    known = list(Cluster.model_fields)
    problems = []
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.7)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
            problems.append(str(positions.problem(f"unknown key {key!r}{hint}", (key,), prefer_key=True)))
    if problems:
        raise ClusterConfigError("\n".join(problems))


def _check_env(environ: Mapping[str, str]) -> None:
    """A mistyped SRTD_* variable is an error, like an unknown key in the file."""
    fields = {f"SRTD_{name.upper()}" for name in Cluster.model_fields}
    problems = []
    for name in sorted(environ):
        if not name.startswith("SRTD_") or name in RUNTIME_ENV or name.startswith(RESERVED_PREFIX):
            continue
        if name in fields:
            continue
        head = name.split("__")[0]
        if "__" in name and head in fields and _nested(head):
            continue
        if "__" in name and head in fields:
            problems.append(f"{name}: {head} is not a mapping, so it has no nested {name[len(head) + 2 :]}")
            continue
        close = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.7)
        hint = f"; did you mean {close[0]}?" if close else ""
        problems.append(f"{name}: not a cluster setting{hint}")
    if problems:
        raise ClusterConfigError("\n".join(problems))


def _nested(variable: str) -> bool:
    """Whether the setting SRTD_<NAME> holds a mapping, so SRTD_<NAME>__<KEY> means something."""
    info = Cluster.model_fields[variable.removeprefix("SRTD_").lower()]
    return any(kind in str(info.annotation) for kind in ("dict", "ReportingConfig", "HostSetupConfig"))


def _describe(err: ValidationError, positions: Positions, path: Path | None) -> str:
    # (place, a rule's?) -> what is wrong there: a union's members each say why, on one line
    lines: dict[tuple[tuple[Any, ...], bool], list[str]] = {}
    for detail in err.errors(include_url=False):
        loc = _fields(tuple(detail["loc"]))
        if detail["type"] == RULES_ERROR:  # a section's own rules: one line per broken rule, at its key
            for rel, text in (detail.get("ctx") or {}).get("problems", []):
                sub = tuple(int(p) if p.isdigit() else p for p in str(rel).split(".") if p)
                lines.setdefault(((*loc, *sub), True), []).append(text)
            continue
        message = detail["msg"][:1].lower() + detail["msg"][1:]
        lines.setdefault((loc, False), []).append(f"{message}, got {_shown(detail.get('input'))}")
    return "\n".join(
        _locate(" or ".join(dict.fromkeys(said)), loc, positions, path, key=key) for (loc, key), said in lines.items()
    )


def _shown(value: Any) -> str:
    # a variable may hold megabytes; the line says enough to recognise it
    text = repr(value)
    return text if len(text) <= SHOWN_INPUT else f"{text[: SHOWN_INPUT - 3]}... ({len(text)} characters)"


def _fields(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # pydantic names a union's members in the path (`constrained-int`, `literal['auto']`): not a key
    return tuple(p for p in loc if isinstance(p, int) or re.fullmatch(r"[A-Za-z0-9_]+", str(p)))


def _locate(message: str, loc: tuple[Any, ...], positions: Positions, path: Path | None, *, key: bool) -> str:
    """`srtslurm.yaml:3:5 key.sub: why` for a value of the file, `SRTD_KEY: sub: why` for a variable's."""
    variable = next((v for v in _variables(loc) if v in os.environ), None)
    if variable is None and path is not None and positions.locate(loc):
        return str(positions.problem(message, loc, prefer_key=key))
    variable = variable or _variables(loc)[0]
    inner = loc[len(variable.removeprefix("SRTD_").split("__")) :]
    return f"{variable}: {'.'.join(map(str, inner))}: {message}" if inner else f"{variable}: {message}"


def _variables(loc: tuple[Any, ...]) -> list[str]:
    """The variables that may have set the value at `loc`, the most nested first."""
    return ["SRTD_" + "__".join(str(p).upper() for p in loc[:n]) for n in range(len(loc), 0, -1)] or ["SRTD_"]
