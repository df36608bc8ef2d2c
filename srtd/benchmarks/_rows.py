"""Benchmark rows: `manual` (none), `custom` (a shell command), `toy`, `aiperf`, and srt-slurm's scripts.

The benchmark is a terminal unit: the job ends when it exits, with its exit code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from srtd._registry import Registry, Row
from srtd.context import PlanContext
from srtd.engines import engine_row
from srtd.errors import PlanError
from srtd.unit import Srun, Unit, UnitKind

SCRIPTS_IN_CONTAINER = "/srtctl-benchmarks"


@dataclass(frozen=True)
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


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")
register_benchmark = BENCHMARKS.register


@register_benchmark("manual")
class Manual(Benchmark):
    """No client: the job serves until it is stopped (or its terminal services end)."""

    runs = False


@register_benchmark("custom")
class Custom(Benchmark):
    """`benchmark.command`, run with `bash -lc` as written."""

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        return ["bash", "-lc", ctx.recipe.benchmark.command or "true"]


@register_benchmark("toy")
class Toy(Benchmark):
    """srtd's toy client (`srtd-toy-bench`)."""

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        bench = ctx.recipe.benchmark
        url = f"http://{ctx.address(target.node or ctx.nodes.head)}:{target.port or 8000}"
        argv = ["srtd-toy-bench", "--url", url, "--model", served_name(ctx) or "toy"]
        argv += ["--requests", str(bench.num_requests or 20), "--concurrency", str(bench.concurrency or 4)]
        argv += ["--max-tokens", str(bench.max_tokens or bench.osl or 16)]
        return [*argv, "--output", f"{ctx.logs_path}/benchmark.json"]


@register_benchmark("aiperf")
class AIPerf(Benchmark):
    """NVIDIA aiperf, one run per concurrency level, driven by `srtd-aiperf` (srtd/benchmarks/aiperf.py).

    The aiperf command is the cluster's `binaries.aiperf` (default: `aiperf` on PATH);
    the tokenizer is the job's model directory.
    """

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        bench = ctx.recipe.benchmark
        url = f"http://{ctx.address(target.node or ctx.nodes.head)}:{target.port or 8000}"
        argv = ["srtd-aiperf", "--aiperf", ctx.cluster.binaries.get("aiperf", "aiperf"), "--url", url]
        argv += ["--model", served_name(ctx) or "model", "--tokenizer", ctx.model_path]
        argv += ["--isl", str(bench.isl or 64), "--osl", str(bench.osl or 32)]
        for level in concurrency_levels(bench.concurrencies, bench.concurrency):
            argv += ["--concurrency", str(level)]
        argv += ["--requests", str(bench.num_requests or 20)]
        if bench.req_rate not in (None, "inf"):
            argv += ["--request-rate", str(bench.req_rate)]
        return [*argv, "--artifacts", f"{ctx.logs_path}/aiperf", "--output", f"{ctx.logs_path}/benchmark.json"]


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
    """srt-slurm's benchmark scripts (sa-bench, mmlu, ...): run from `benchmark_scripts`, settings in env."""

    def argv(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        return ["bash", f"{SCRIPTS_IN_CONTAINER}/{self.name}/bench.sh"]

    def env(self, ctx: PlanContext, target: BenchmarkTarget) -> dict[str, str]:
        out = {}
        for field, value in ctx.recipe.benchmark.model_dump(exclude={"type", "env", "placement", "sweep"}).items():
            if value in (None, {}, [], ()):
                continue
            text = "x".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
            out[f"SRT_BENCH_{re.sub(r'[^A-Z0-9]', '_', field.upper())}"] = text
        return out


def benchmark_row(name: str) -> Benchmark:
    row = BENCHMARKS.get(name)
    if row is None:
        row = type(f"Script_{name}", (Script,), {})()
        type(row).name = name
    return row


def benchmark_unit(ctx: PlanContext, target: BenchmarkTarget, node: str) -> Unit | None:
    bench = ctx.recipe.benchmark
    row = benchmark_row(bench.type)
    if not row.runs:
        return None
    if isinstance(row, Script) and ctx.containerized:
        scripts = ctx.cluster.benchmark_scripts
        if scripts is None:
            ctx.warn(
                f"benchmark {bench.type!r} runs srt-slurm's script from {SCRIPTS_IN_CONTAINER}; "
                "set `benchmark_scripts` in the cluster settings to mount it"
            )
    url_host = ctx.address(target.node) if target.node else ""
    env = {
        **ctx.job_env(),
        "SRT_FRONTEND_HOST": url_host,
        "SRT_FRONTEND_PORT": str(target.port or ""),
        "SRT_FRONTEND_URL": f"http://{url_host}:{target.port}" if target.node else "",
        "SRT_MODEL": served_name(ctx),
        "SRT_GPUS_PER_NODE": str(ctx.gpus_per_node),
        "SRT_WORKER_NODES": ",".join(ctx.nodes.workers),
    }
    for name, nodes in ctx.nodes.pools.items():
        key = re.sub(r"[^A-Z0-9]", "_", name.upper())
        env[f"SRT_SERVICE_{key}_NODES"] = ",".join(nodes)
        env[f"SRT_SERVICE_{key}_IPS"] = ",".join(ctx.address(n) for n in nodes)
        env[f"SRT_SERVICE_{key}_NODE_COUNT"] = str(len(nodes))
    env.update(row.env(ctx, target))
    env.update(dict(ctx.recipe.environment.items()))
    env.update(bench.env)
    image = bench.container_image or ctx.recipe.model.container
    container = ctx.container(image)
    if container is not None and ctx.cluster.benchmark_scripts:
        container = container.model_copy(
            update={"mounts": {**container.mounts, ctx.cluster.benchmark_scripts: SCRIPTS_IN_CONTAINER}}
        )
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
        log=ctx.log("benchmark"),
        echo=bench.stream_output,
        critical=False,
        terminal=True,
        tier=0,
        terminate_timeout=15.0,
    )
