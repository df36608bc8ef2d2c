"""Benchmark rows: `manual` (none), `custom` (a shell command), `toy`, `aiperf`, and srt-slurm's scripts.

The benchmark is a terminal unit: the job ends when it exits, with its exit code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from srtd._registry import Registry, Row
from srtd._value import value_class
from srtd.context import PlanContext
from srtd.engines import engine_row, nsys_client_env, profiling_client_env
from srtd.errors import PlanError, Problem
from srtd.layout import Place, log_file
from srtd.recipe import MANUAL_BENCHMARK
from srtd.topology import FRONTEND_PUBLIC_PORT
from srtd.unit import ResultsSpec, Srun, Unit, UnitKind

SCRIPTS_IN_CONTAINER = "/srtctl-benchmarks"
RESULTS_FILE = "benchmark.json"  # srtd's own clients' results (the status reporter reads it there)


@value_class
class BenchmarkTarget:
    """Where the benchmark sends requests."""

    node: str | None
    port: int | None


def served_name(ctx: PlanContext) -> str:
    """The model name clients ask for: what the first role's engine serves."""
    for role in ctx.recipe.roles:
        cfg = ctx.recipe.engine_for(role)
        if cfg is not None:
            return engine_row(cfg).served_model_name(ctx, role)
    return ""


class Benchmark(Row):
    name: ClassVar[str] = ""
    runs: ClassVar[bool] = True  # manual runs nothing

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        raise NotImplementedError

    def env(self, ctx: PlanContext, target: BenchmarkTarget) -> dict[str, str]:
        return {}

    def results_at(self, ctx: PlanContext) -> tuple[str, str] | None:
        """(reader, path) of what the benchmark measured (docs/results.md), or None: not read."""
        return None


def serving_gpus(ctx: PlanContext) -> int:
    """The GPUs of every worker endpoint: the denominator of throughput per GPU."""
    return sum(e.gpu_count for endpoints in ctx.endpoints.values() for e in endpoints)


def results_spec(row: Benchmark, ctx: PlanContext) -> ResultsSpec | None:
    where = row.results_at(ctx)
    if where is None:
        return None
    reader, path = where
    return ResultsSpec(reader=reader, path=path, gpus=serving_gpus(ctx), gate=not ctx.recipe.benchmark.accept_empty)


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")
register_benchmark = BENCHMARKS.register


@register_benchmark(MANUAL_BENCHMARK)
class Manual(Benchmark):
    """No client: the job serves until it is stopped (or its terminal services end)."""

    runs = False


@register_benchmark("custom")
class Custom(Benchmark):
    """`benchmark.command` as written: `bash -lc` in the job's container, `bash -c` on a host.

    In a container the login profile is the image's, and srt-slurm runs the command that
    way.  On a host it would be the machine's, which sets PATH anew (Debian's /etc/profile
    does, for every user): the programs of the venv srtd runs from would be lost, and the
    command would not see the environment every other unit gets (docs/recipe.md).
    """

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        return ["bash", "-lc" if ctx.containerized else "-c", ctx.recipe.benchmark.command or "true"]

    def results_at(self, ctx: PlanContext) -> tuple[str, str] | None:
        # Read (and gated) only when the recipe says where the command writes: existing
        # custom benchmarks keep working as they did.
        path = ctx.recipe.benchmark.results_file
        return ("srtd", path) if path else None


@register_benchmark("toy")
class Toy(Benchmark):
    """srtd's toy client (`srtd-toy-bench`)."""

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        bench = ctx.recipe.benchmark
        url = f"http://{ctx.address(target.node or ctx.nodes.head)}:{target.port or ctx.port(FRONTEND_PUBLIC_PORT)}"
        argv = ["srtd-toy-bench", "--url", url, "--model", served_name(ctx) or "toy"]
        argv += ["--requests", str(_or(bench.num_requests, 20)), "--concurrency", str(_or(bench.concurrency, 4))]
        argv += ["--max-tokens", str(bench.max_tokens or bench.osl or 16)]
        return [*argv, "--output", ctx.job_file(Place.JOB, RESULTS_FILE, in_step=True)]

    def results_at(self, ctx: PlanContext) -> tuple[str, str] | None:
        return ("srtd", log_file(ctx.cluster.log_layout, Place.JOB, RESULTS_FILE))


@register_benchmark("aiperf")
class AIPerf(Benchmark):
    """NVIDIA aiperf, one run per concurrency level, driven by `srtd-aiperf` (srtd/benchmarks/aiperf.py).

    The aiperf command is the cluster's `binaries.aiperf` (default: `aiperf` on PATH);
    the tokenizer is the job's model directory.
    """

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        bench = ctx.recipe.benchmark
        url = f"http://{ctx.address(target.node or ctx.nodes.head)}:{target.port or ctx.port(FRONTEND_PUBLIC_PORT)}"
        argv = ["srtd-aiperf", "--aiperf", ctx.cluster.binaries.get("aiperf", "aiperf"), "--url", url]
        argv += ["--model", served_name(ctx) or "model", "--tokenizer", ctx.model_path]
        argv += ["--isl", str(bench.isl or 64), "--osl", str(bench.osl or 32)]
        for level in concurrency_levels(bench.concurrencies, bench.concurrency):
            argv += ["--concurrency", str(level)]
        argv += ["--requests", str(_or(bench.num_requests, 20))]
        if bench.req_rate not in (None, "inf"):
            argv += ["--request-rate", str(bench.req_rate)]
        artifacts = ctx.job_file(Place.JOB, "aiperf", in_step=True)
        return [*argv, "--artifacts", artifacts, "--output", ctx.job_file(Place.JOB, RESULTS_FILE, in_step=True)]

    def results_at(self, ctx: PlanContext) -> tuple[str, str] | None:
        return ("srtd", log_file(ctx.cluster.log_layout, Place.JOB, RESULTS_FILE))


def concurrency_levels(levels: tuple[int, ...] | str | None, single: int | None) -> list[int]:
    """`concurrencies` as a list or an `x`-separated string (`1x4`), else `concurrency`, else 1."""
    if isinstance(levels, str):
        parts = levels.split("x")
        if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise PlanError(f"benchmark.concurrencies: {levels!r} is not an x-separated list of positive numbers")
        return [int(p) for p in parts]
    if levels:
        return list(levels)
    return [single or 1]


class Script(Benchmark):
    """srt-slurm's benchmark scripts (sa-bench, mmlu, ...): run from `benchmark_scripts`, settings in env.

    A row that knows its script's positional arguments overrides `args`; the others get
    every benchmark setting as `SRT_BENCH_<FIELD>`.
    """

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        return ["bash", f"{SCRIPTS_IN_CONTAINER}/{self.name}/bench.sh", *(self.args(ctx, target) or ())]

    def args(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str] | None:
        """The script's positional arguments, or None when it reads `SRT_BENCH_*` instead."""
        return None

    def env(self, ctx: PlanContext, target: BenchmarkTarget) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.args(ctx, target) is not None:
            return out
        for field, value in ctx.recipe.benchmark.model_dump(exclude={"type", "env", "placement", "sweep"}).items():
            if value in (None, {}, [], ()):
                continue
            text = "x".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
            out[f"SRT_BENCH_{re.sub(r'[^A-Z0-9]', '_', field.upper())}"] = text
        return out


def _key(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def contract_env(
    ctx: PlanContext, target: BenchmarkTarget, workers: Sequence[Unit], services: Mapping[str, Sequence[str]]
) -> dict[str, str]:
    """What every benchmark client is told about the job (srt-slurm's names, so its scripts work).

    The frontend, the worker endpoints per role (`SRT_<ROLE>_ENDPOINTS` are the ports whose
    `/metrics` the client may scrape), and the nodes of every service.
    """
    env = {"SRTCTL_FRONTEND_TYPE": ctx.recipe.frontend.type}
    if target.node:
        env["SRT_FRONTEND_HOST"] = ctx.address(target.node)
        env["SRT_FRONTEND_PORT"] = str(target.port or "")
    env["SRT_GPUS_PER_NODE"] = str(ctx.gpus_per_node)
    env["SRT_WORKER_NODES"] = ",".join(ctx.nodes.workers)
    leaders: dict[str, list[Unit]] = {}
    seen: set[tuple[str | None, int | None]] = set()
    for unit in workers:
        if unit.kind == UnitKind.WORKER and (unit.role, unit.index) not in seen:
            seen.add((unit.role, unit.index))
            leaders.setdefault(unit.role or "", []).append(unit)
    metrics: list[str] = []
    for role, units in leaders.items():
        endpoints = []
        for unit in units:
            # A Dynamo worker serves /metrics on its system port, a direct one on its HTTP port.
            sys_port = unit.env.get("DYN_SYSTEM_PORT")
            port = int(sys_port) if sys_port else unit.ports.get("http")
            if port is not None:
                endpoints.append(f"{ctx.address(unit.node)}:{port}")
        env[f"SRT_{_key(role)}_IPS"] = ",".join(ctx.address(u.node) for u in units)
        if endpoints:
            env[f"SRT_{_key(role)}_ENDPOINTS"] = ",".join(endpoints)
            metrics += [f"http://{e}/metrics" for e in endpoints]
    if metrics:
        env["AIPERF_SERVER_METRICS_URLS"] = ",".join(metrics)
    env.update(profiling_client_env(ctx, leaders, target.port, served_name(ctx)))
    env.update(nsys_client_env(ctx))  # the capture window's control (observability's nsys)
    for name, nodes in services.items():
        key = _key(name)
        env[f"SRT_SERVICE_{key}_NODES"] = ",".join(nodes)
        env[f"SRT_SERVICE_{key}_IPS"] = ",".join(ctx.address(n) for n in nodes)
        env[f"SRT_SERVICE_{key}_NODE_COUNT"] = str(len(nodes))
    return env


def benchmark_problems(type_name: str) -> list[tuple[str, str]]:
    """(path, message) of a `benchmark.type` no row has: refused before any node is asked for.

    Like srt-slurm, which refuses a type it has no runner for: a misspelt name would
    otherwise be found only once the job's workers are up, as a missing bench.sh.
    """
    return [] if BENCHMARKS.get(type_name) else [("benchmark.type", BENCHMARKS.unknown(type_name))]


def benchmark_row(name: str) -> Benchmark:
    row = BENCHMARKS.get(name)
    if row is None:
        raise PlanError(Problem(BENCHMARKS.unknown(name), path="benchmark.type"))
    return row


def missing_script(type_name: str, scripts: str | None) -> Problem | None:
    """The bench.sh of an srt-slurm benchmark that is not there, said before the job is queued.

    Only where this machine sees the scripts' directory (the login node usually does): a
    directory only the compute nodes see cannot be checked, and is not.  The plan reads
    no files, so the commands ask this beside it.
    """
    row = BENCHMARKS.get(type_name)
    if not isinstance(row, Script) or scripts is None or not Path(scripts).is_dir():
        return None
    script = Path(scripts) / row.name / "bench.sh"
    if script.is_file():
        return None
    return Problem(f"benchmark {row.name!r} has no script: {script} does not exist", path="benchmark.type")


def benchmark_unit(
    ctx: PlanContext,
    target: BenchmarkTarget,
    node: str,
    workers: Sequence[Unit] = (),
    services: Mapping[str, Sequence[str]] | None = None,
) -> Unit | None:
    """The benchmark client; its environment names the workers and every service's nodes."""
    bench = ctx.recipe.benchmark
    row = benchmark_row(bench.type)
    if not row.runs:
        return None
    if isinstance(row, Script) and ctx.containerized and ctx.cluster.benchmark_scripts is None:
        ctx.warn(
            f"benchmark {bench.type!r} runs srt-slurm's script from {SCRIPTS_IN_CONTAINER}; "
            "set `benchmark_scripts` in the cluster settings to mount it"
        )
    env = {**ctx.job_env(), **contract_env(ctx, target, workers, services or {})}
    env.update(row.env(ctx, target))
    env.update(dict(ctx.recipe.environment.items()))
    env.update(bench.env)
    image = bench.container_image or ctx.recipe.model.container
    container = ctx.container(image)
    if container is not None and ctx.cluster.benchmark_scripts:
        container = replace(container, mounts={**container.mounts, ctx.cluster.benchmark_scripts: SCRIPTS_IN_CONTAINER})
    return Unit(
        name="benchmark",
        kind=UnitKind.BENCHMARK,
        phase="benchmark",
        nodes=(node,),
        argv=tuple(row.argv(ctx, target)),
        preamble=ctx.cluster.default_bash_preamble,
        env=env,
        container=container,
        srun=Srun(options={**ctx.cluster.default_srun_options, **ctx.recipe.srun_options}),
        log=ctx.log("benchmark", Place.JOB),
        echo=bench.stream_output,
        critical=False,
        terminal=True,
        tier=0,
        terminate_timeout=15.0,
        results=results_spec(row, ctx),
        on_disruption=bench.on_disruption,
    )


def _or(value: int | None, default: int) -> int:
    # Not `value or default`: a 0 the recipe wrote must not turn into the default (the recipe refuses it).
    return default if value is None else value
