"""Explicit profiling (`profiling.type: torch`, `nsys`, `nsys-time`): the workers' env and argv prefix.

A torch profile is taken by the engine itself between two steps; what it needs is where
to write (the engine's profiler-directory variable, a row's `torch_profiler_dir_env`)
and which window its role has.  An `nsys` profile is the same step window, the engine
opening a CUDA-profiler range that `nsys profile -c cudaProfilerApi` captures; `nsys-time`
captures a fixed span (`delay_secs`, `duration_secs`) instead.  The benchmark client gets
the same windows and the workers' endpoints, so a script can start and stop the profile
over HTTP.  The names are srt-slurm's, so its scripts work unchanged.  Wrapping the
units is `_observe`'s (with the observability preset's nsys capture).
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence

from srtd.context import PlanContext
from srtd.recipe import ProfilingPhaseConfig, Recipe
from srtd.unit import Unit

PROFILES = "profiles"  # under the job's log directory
NSYS_TYPES = ("nsys", "nsys-time")


def profiled(recipe: Recipe) -> bool:
    return recipe.profiling.type != "none"


def torch(recipe: Recipe) -> bool:
    return recipe.profiling.type == "torch"


def window_of(recipe: Recipe, role: str) -> ProfilingPhaseConfig | None:
    """The step window of a role: `aggregated` is the agg role's, the others go by name."""
    p = recipe.profiling
    return {"agg": p.aggregated, "prefill": p.prefill, "decode": p.decode}.get(role)


def _window_env(role: str, window: ProfilingPhaseConfig) -> dict[str, str]:
    env = {}
    key = role.upper()
    if window.start_step is not None:
        env[f"PROFILE_{key}_START_STEP"] = str(window.start_step)
    if window.stop_step is not None:
        env[f"PROFILE_{key}_STOP_STEP"] = str(window.stop_step)
    return env


def _dir_env(recipe: Recipe, roles: Sequence[str]) -> str | None:
    """The profiler-directory variable of the first of these roles' engines that has one."""
    from srtd.engines._base import engine_row

    for role in roles:
        cfg = recipe.engine_for(role)
        if cfg is not None and engine_row(cfg).torch_profiler_dir_env:
            return engine_row(cfg).torch_profiler_dir_env
    return None


def worker_env(ctx: PlanContext, role: str) -> dict[str, str]:
    """A worker's profiling variables; empty unless its role has a torch window."""
    window = window_of(ctx.recipe, role)
    if not profiled(ctx.recipe) or window is None:
        return {}
    kind = ctx.recipe.profiling.type
    env = {"PROFILE_TYPE": kind, "PROFILING_MODE": role, **_window_env(role, window)}
    dir_env = _dir_env(ctx.recipe, (role,))
    if dir_env and torch(ctx.recipe):
        env[dir_env] = posixpath.join(ctx.logs_path, PROFILES, role)
    if kind == "nsys" and _row_of(ctx.recipe, role, "nsys_mpi") and window.start_step is not None:
        # an MPI engine's executor opens the CUDA-profiler range itself between these steps
        env["TLLM_PROFILE_START_STOP"] = f"{window.start_step}-{window.stop_step}"
        env["TLLM_LLMAPI_ENABLE_NVTX"] = "1"
    return env


def client_env(
    ctx: PlanContext, leaders: Mapping[str, Sequence[Unit]], frontend_port: int | None, model: str
) -> dict[str, str]:
    """What the benchmark client needs to drive the profile: windows, worker endpoints, where output goes."""
    if not profiled(ctx.recipe):
        return {}
    out_dir = posixpath.join(ctx.logs_path, PROFILES)
    env = {"PROFILE_TYPE": ctx.recipe.profiling.type, "PROFILE_OUTPUT_DIR": out_dir, "BENCH_MODEL_NAME": model}
    env["HEAD_NODE"] = ctx.nodes.head
    if frontend_port is not None:
        env["HEAD_PORT"] = str(frontend_port)
    dir_env = _dir_env(ctx.recipe, list(leaders))
    if dir_env and torch(ctx.recipe):
        env[dir_env] = out_dir
    for role, units in leaders.items():
        window = window_of(ctx.recipe, role)
        if window is None:
            continue
        env.update(_window_env(role, window))
        served = [u for u in units if "http" in u.ports]
        env[f"PROFILE_{role.upper()}_IPS"] = ",".join(ctx.address(u.node) for u in units)
        if served:
            env[f"PROFILE_{role.upper()}_ENDPOINTS"] = ",".join(
                f"{ctx.address(u.node)}:{u.ports['http']}" for u in served
            )
            env.setdefault("PROFILE_WORKER_PORT", str(served[0].ports["http"]))
    return env


def _row_of(recipe: Recipe, role: str, attribute: str) -> bool:
    from srtd.engines._base import engine_row

    cfg = recipe.engine_for(role)
    return cfg is not None and bool(getattr(engine_row(cfg), attribute))


def selected(recipe: Recipe, role: str, index: int, rank: int) -> bool:
    """Is this process (worker `index`, process `rank` within it) one an nsys profile wraps?"""
    window = window_of(recipe, role)
    if window is None:
        return recipe.profiling.type == "nsys-time"  # a time span needs no step window
    return window.capture_scope == "all" or (window.worker_index, window.worker_rank) == (index, rank)


def nsys_binary(ctx: PlanContext) -> str:
    """The cluster's `binaries.nsys`, else `nsys` on the image's PATH."""
    return ctx.cluster.binaries.get("nsys", "nsys")


def output_base(ctx: PlanContext, role: str, name: str) -> str:
    """Where a worker's report goes, without nsys' `.nsys-rep`."""
    return posixpath.join(ctx.logs_path, PROFILES, role, name)


def nsys_profile_argv(ctx: PlanContext, role: str, output: str, *, dynamo: bool) -> list[str]:
    """`nsys profile ...` before a worker's command, with srt-slurm's flags (an MPI engine has its own).

    `dynamo`: the worker is a Dynamo process, which starts the engine after an exec, so nsys
    must follow forks (unless `trace_fork_before_exec` says otherwise)."""
    p = ctx.recipe.profiling
    nsys = nsys_binary(ctx)
    timed = p.type == "nsys-time"
    span = ["--delay", str(p.delay_secs)] if p.delay_secs is not None else []
    span += ["--duration", str(p.duration_secs)] if p.duration_secs is not None else []
    extra = list(p.extra_nsys_args or ())
    if _row_of(ctx.recipe, role, "nsys_mpi"):
        argv = [nsys, "profile", "-t", "cuda,nvtx,ucx", "--sample=none", "--cuda-graph-trace=node"]
        argv += span if timed else ["-c", "cudaProfilerApi", "--capture-range-end", "stop"]
        return [*argv, *extra, "--kill", "none", "--wait", "all", "--force-overwrite", "true", "-o", output]
    argv = [nsys, "profile", "-t", p.nsys_trace, "--cuda-graph-trace=node"]
    if not timed:
        argv += ["-c", "cudaProfilerApi", "--capture-range-end", p.capture_range_end]
    argv += ["--force-overwrite", "true", *(span if timed else []), *extra]
    fork = dynamo if p.trace_fork_before_exec is None else p.trace_fork_before_exec
    return [*argv, *(["--trace-fork-before-exec=true"] if fork else []), "-o", output]


def library_path_preamble(recipe: Recipe) -> str | None:
    """`nsys_library_paths` before the worker's `LD_LIBRARY_PATH` (the profiler's libraries first)."""
    paths = recipe.profiling.nsys_library_paths
    if recipe.profiling.type not in NSYS_TYPES or not paths:
        return None
    joined = shlex.quote(":".join(paths))
    return f'export LD_LIBRARY_PATH={joined}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"'
