"""Torch profiling (`profiling.type: torch`): the environment workers and the client get.

A torch profile is taken by the engine itself between two steps; what it needs is where
to write (the engine's profiler-directory variable, a row's `torch_profiler_dir_env`)
and which window its role has.  The benchmark client gets the same windows and the
workers' endpoints, so a script can start and stop the profile over HTTP.  The names
are srt-slurm's, so its scripts work unchanged.

Nsight Systems profiling (`nsys`, `nsys-time`) wraps the worker's command and is not
launched yet: the plan warns and the workers run unwrapped.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence

from srtd.context import PlanContext
from srtd.recipe import ProfilingPhaseConfig, Recipe
from srtd.unit import Unit

PROFILES = "profiles"  # under the job's log directory
NOT_LAUNCHED = ("nsys", "nsys-time")


def profiled(recipe: Recipe) -> bool:
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
    env = {"PROFILE_TYPE": "torch", "PROFILING_MODE": role, **_window_env(role, window)}
    dir_env = _dir_env(ctx.recipe, (role,))
    if dir_env:
        env[dir_env] = posixpath.join(ctx.logs_path, PROFILES, role)
    return env


def client_env(
    ctx: PlanContext, leaders: Mapping[str, Sequence[Unit]], frontend_port: int | None, model: str
) -> dict[str, str]:
    """What the benchmark client needs to drive the profile: windows, worker endpoints, where output goes."""
    if not profiled(ctx.recipe):
        return {}
    out_dir = posixpath.join(ctx.logs_path, PROFILES)
    env = {"PROFILE_TYPE": "torch", "PROFILE_OUTPUT_DIR": out_dir, "BENCH_MODEL_NAME": model}
    env["HEAD_NODE"] = ctx.nodes.head
    if frontend_port is not None:
        env["HEAD_PORT"] = str(frontend_port)
    dir_env = _dir_env(ctx.recipe, list(leaders))
    if dir_env:
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


def warn_unlaunched(ctx: PlanContext) -> None:
    kind = ctx.recipe.profiling.type
    if kind in NOT_LAUNCHED:
        ctx.warn(f"profiling.type {kind!r} is not launched yet: the workers run without the Nsight Systems wrapper")
