"""Nsight Systems around workers and frontends, and `observability.enabled`'s environment.

Two things wrap a process in nsys, and at most one of them applies (explicit profiling wins):

- `profiling.type: nsys` / `nsys-time`: the worker runs under `nsys profile`, capturing
  a CUDA-profiler range the engine opens between two steps (`nsys`) or a fixed time span
  (`nsys-time`).  The flags are srt-slurm's, so the reports look the same.
- `observability.enabled` with `observability.nsys.enabled` (the default) and no explicit
  profiling: every worker and every Dynamo frontend process runs under srtd's window
  program (`nsys_window.py`, written into the job's log directory).  With the default
  `capture_window: measured_workload` the capture starts and stops when the benchmark
  client says so (`python3 "$SRT_NSYS_CONTROL_SCRIPT" start|stop`); with
  `including_startup` the process runs under `nsys profile` from launch to teardown.

`observability.enabled` also turns on Dynamo's JSONL logging with span events at debug
level on workers and frontends, and the frontend's request trace.  A variable the recipe
sets itself (the role's `env`, `frontend.env`, `environment`) always wins.

The rules compare no engine or frontend name: an engine row says which variables make its
processes emit NVTX ranges (`nsys_env`) and whether it is an MPI engine (`nsys_mpi`); the
plan builder says which frontend units are Dynamo processes.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import resources

from srtd.context import PlanContext
from srtd.engines._profiling import (
    NSYS_TYPES,
    PROFILES,
    library_path_preamble,
    nsys_binary,
    nsys_profile_argv,
    output_base,
    profiled,
    selected,
)
from srtd.recipe import Recipe
from srtd.unit import Unit

CONTROL = ".control"  # under profiles/: the window's requests and answers
STOPPED = ".stopped"  # under profiles/: each step's report barrier
WINDOW_SCRIPT = "nsys_window.py"  # under profiles/
APP_GRACE_SECONDS = 150  # after the report budget: the application's own shutdown
SAMPLE_PERIOD = ("--sampling-period=26000000", "--samples-per-backtrace=32")

LOGGING_ENV = {"DYN_LOGGING_SPAN_EVENTS": "true", "DYN_LOGGING_JSONL": "true", "DYN_LOG": "debug"}
NVTX_ENV = {"DYN_NVTX": "1", "DYN_ENABLE_RUST_NVTX": "1"}
REQUEST_TRACE_FILE = "dynamo-request-trace"  # under the log directory


def window_on(recipe: Recipe) -> bool:
    """Does the observability preset wrap processes in nsys (explicit profiling takes precedence)?"""
    obs = recipe.observability
    return obs.enabled and obs.nsys.enabled and not profiled(recipe)


def measured(recipe: Recipe) -> bool:
    """The window opens and closes on the client's request (not from launch to teardown)."""
    return window_on(recipe) and recipe.observability.nsys.capture_window == "measured_workload"


def control_dir(ctx: PlanContext) -> str:
    return posixpath.join(ctx.logs_path, PROFILES, CONTROL)


def script_path(ctx: PlanContext) -> str:
    return posixpath.join(ctx.logs_path, PROFILES, WINDOW_SCRIPT)


def client_env(ctx: PlanContext) -> dict[str, str]:
    """What a benchmark client needs to open and close the window (srt-slurm's names)."""
    if not measured(ctx.recipe):
        return {}
    return {
        "SRT_NSYS_CONTROL_DIR": control_dir(ctx),
        "SRT_NSYS_CONTROL_SCRIPT": script_path(ctx),
        "SRT_NSYS_CONTROL_TIMEOUT": str(ctx.recipe.observability.nsys.report_timeout_secs),
    }


def sampling_args(recipe: Recipe, *, frontend: bool) -> list[str]:
    """The CPU sampling of one captured process as nsys flags (GPU metrics stay off).

    `cpu_sampling` applies to every process; newer srt-slurm's `frontend_cpu_sampling`,
    where set, samples on frontends only (system-wide) and writes its flags in its order."""
    nsys = recipe.observability.nsys
    if nsys.frontend_cpu_sampling is not None:
        sample = "system-wide" if frontend and nsys.frontend_cpu_sampling else "none"
        args = [f"--sample={sample}", "--cpuctxsw=none", "--gpu-metrics-devices=none"]
        return args + list(SAMPLE_PERIOD) if sample != "none" else args
    scope = nsys.cpu_sampling
    args = ["--gpu-metrics-devices=none", f"--sample={scope}", f"--cpuctxsw={scope}"]
    return args + list(SAMPLE_PERIOD) if scope != "none" else args


# --------------------------------------------------------------------------- units


def observed_workers(
    ctx: PlanContext, workers: Sequence[Unit], nsys_envs: Mapping[str, Mapping[str, str]], *, dynamo: bool
) -> list[Unit]:
    """The workers with the profiling wrapper and the observability environment applied.

    `nsys_envs`: each role's engine-row NVTX variables (`Engine.nsys_env`); `dynamo`: the
    workers are Dynamo processes."""
    recipe = ctx.recipe
    out = []
    for rank, unit in _ranked(workers):
        role = unit.role or ""
        own = set(recipe.roles[role].env) | set(recipe.environment) if role in recipe.roles else set()
        env = _defaults(unit.env, LOGGING_ENV if recipe.observability.enabled else {}, own)
        if window_on(recipe):
            env = _defaults(env, {**NVTX_ENV, **nsys_envs.get(role, {})}, own)
            report = posixpath.join(role, _worker_name(ctx, unit))
            unit = _windowed(ctx, replace(unit, env=env), report, frontend=False)
        elif recipe.profiling.type in NSYS_TYPES and selected(recipe, role, unit.index or 0, rank):
            argv = nsys_profile_argv(ctx, role, output_base(ctx, role, _worker_name(ctx, unit)), dynamo=dynamo)
            pre = "\n".join(p for p in (library_path_preamble(recipe), unit.preamble) if p) or None
            unit = replace(unit, argv=(*argv, *unit.argv), env=env, preamble=pre)
        else:
            unit = replace(unit, env=env)
        out.append(unit)
    return out


def observed_frontends(
    ctx: PlanContext, units: Sequence[Unit], processes: Iterable[str], *, dynamo: bool
) -> list[Unit]:
    """Frontend units with the logging and request-trace environment; Dynamo's processes also in nsys.

    `processes`: the names of the frontend's own server units (not nginx in front of them)."""
    recipe = ctx.recipe
    if not recipe.observability.enabled:
        return list(units)
    names = set(processes)
    own = set(recipe.frontend.env or {}) | set(recipe.environment)
    trace = {"DYN_REQUEST_TRACE": "1", "DYN_REQUEST_TRACE_FILE_PATH": posixpath.join(ctx.logs_path, REQUEST_TRACE_FILE)}
    out = []
    for unit in units:
        if unit.name in names:
            unit = replace(unit, env=_defaults(unit.env, {**LOGGING_ENV, **trace}, own))
            if dynamo and window_on(recipe):
                env = _defaults(unit.env, NVTX_ENV, own)
                report = f"frontend/{unit.node}_{unit.name}"
                unit = _windowed(ctx, replace(unit, env=env), report, frontend=True)
        out.append(unit)
    return out


def _defaults(env: Mapping[str, str], values: Mapping[str, str], own: set[str]) -> dict[str, str]:
    """srtd's values over its own defaults, never over a variable the recipe sets."""
    return {**env, **{k: v for k, v in values.items() if k not in own}}


def _ranked(workers: Sequence[Unit]) -> list[tuple[int, Unit]]:
    """Each worker unit with its process rank within its worker (node order)."""
    seen: dict[tuple[str | None, int | None], int] = {}
    out = []
    for unit in workers:
        key = (unit.role, unit.index)
        out.append((seen.get(key, 0), unit))
        seen[key] = seen.get(key, 0) + 1
    return out


def _worker_name(ctx: PlanContext, unit: Unit) -> str:
    """`<node>_<role>_w<index>_profile_<rank or GPUs>`: one report name per process, as srt-slurm names it."""
    base = f"{unit.node}_{unit.role}_w{unit.index}_profile"
    if unit.srun.ntasks > 1:
        return f"{base}_rank%q{{SLURM_PROCID}}"  # nsys expands it per MPI rank
    gpus = list(unit.gpus) or list(range(ctx.gpus_per_node))
    contiguous = gpus == list(range(gpus[0], gpus[0] + len(gpus))) if gpus else False
    tag = f"{gpus[0]}-{gpus[-1]}" if contiguous and len(gpus) > 1 else "_".join(map(str, gpus))
    return f"{base}_gpu{tag}"


def _windowed(ctx: PlanContext, unit: Unit, report: str, *, frontend: bool) -> Unit:
    """The unit under the observability nsys capture, with its report barrier's environment."""
    obs = ctx.recipe.observability.nsys
    step = unit.name  # unique in the plan: the participant's name in the control directory
    ranks = unit.srun.ntasks
    output = posixpath.join(ctx.logs_path, PROFILES, report)
    env = {
        **unit.env,
        "SRT_NSYS_REPORT_BARRIER_DIR": posixpath.join(ctx.logs_path, PROFILES, STOPPED, step),
        "SRT_NSYS_REPORT_EXPECTED": str(ranks),
        "SRT_NSYS_REPORT_STOP_TIMEOUT": str(obs.report_timeout_secs),
    }
    if obs.nvtx_injection_path:
        env["NVTX_INJECTION64_PATH"] = obs.nvtx_injection_path
    if obs.capture_window == "measured_workload":
        _announce(ctx, step, ranks)
        spec = {
            "control_dir": control_dir(ctx),
            "step": step,
            "ranks": ranks,
            "nsys": nsys_binary(ctx),
            "start_args": sampling_args(ctx.recipe, frontend=frontend),
            "output": output,
            "timeout": obs.report_timeout_secs,
        }
        wrapper = ["python3", script_path(ctx), "worker", "--spec", json.dumps(spec), "--"]
    else:
        sampling = sampling_args(ctx.recipe, frontend=frontend)
        wrapper = [nsys_binary(ctx), "profile", "--force-overwrite=true", "--trace=nvtx", *sampling]
        wrapper += ["-o", output]
    return replace(
        unit,
        argv=(*wrapper, *unit.argv),
        env=env,
        terminate_timeout=max(unit.terminate_timeout, float(obs.report_timeout_secs + APP_GRACE_SECONDS)),
    )


def _announce(ctx: PlanContext, step: str, ranks: int) -> None:
    """The window program and this step's entry in the control directory, written before launch."""
    profiles = posixpath.join(ctx.log_dir, PROFILES)
    script = resources.files("srtd.engines").joinpath("_nsys_window.py").read_text(encoding="utf-8")
    ctx.files[posixpath.join(profiles, WINDOW_SCRIPT)] = script
    ctx.files[posixpath.join(profiles, CONTROL, "steps", f"{step}.json")] = json.dumps({"ranks": ranks}) + "\n"
