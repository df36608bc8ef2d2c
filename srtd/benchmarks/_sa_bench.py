"""srt-slurm's benchmark scripts: sa-bench (its 19 positional arguments), mlperf, and the rest.

srt-slurm runs only the types it registers a runner for; these are its names. Each runs
`<benchmark_scripts>/<type>/bench.sh`, its settings in `SRT_BENCH_*` unless the row says
the script's arguments.
"""

from __future__ import annotations

from srtd.benchmarks._rows import BenchmarkTarget, Script, register_benchmark, served_name
from srtd.context import PlanContext
from srtd.topology import FRONTEND_PUBLIC_PORT


def _text(value: object, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "x".join(str(v) for v in value)
    return str(value)


@register_benchmark("sa-bench")
class SaBench(Script):
    """`bench.sh ENDPOINT ISL OSL CONCURRENCIES RATE TOKENIZER MODEL DISAGG TOTAL_GPUS PREFILL_GPUS
    DECODE_GPUS RANGE_RATIO PROMPTS_MULT WARMUP_MULT NUM_REQUESTS CHAT_TEMPLATE DATASET DATASET_PATH
    SKIP_WARMUP` (the order srt-slurm's script reads them in)."""

    def args(self, ctx: PlanContext, target: BenchmarkTarget) -> list[str]:
        bench = ctx.recipe.benchmark
        # The client runs beside the frontend (srt-slurm always sends to localhost).
        endpoint = f"http://localhost:{target.port or ctx.port(FRONTEND_PUBLIC_PORT)}"
        gpus = {role: sum(e.gpu_count for e in ctx.endpoints.get(role, [])) for role in ("prefill", "decode")}
        disaggregated = ctx.recipe.disaggregated
        if disaggregated:
            total = gpus["prefill"] + gpus["decode"]
        else:
            total = max(len(ctx.nodes.roles.get("agg", ())), 1) * ctx.gpus_per_node
            gpus = {"prefill": 0, "decode": 0}
        return [
            endpoint,
            _text(bench.isl),
            _text(bench.osl),
            _text(bench.concurrencies),
            _text(bench.req_rate, "inf") or "inf",
            ctx.model_path,
            served_name(ctx),
            _text(disaggregated),
            str(total),
            str(gpus["prefill"]),
            str(gpus["decode"]),
            _text(bench.random_range_ratio, "0.8"),
            _text(bench.num_prompts_mult, "10"),
            _text(bench.num_warmup_mult, "2"),
            _text(bench.num_requests),
            _text(bench.use_chat_template),
            bench.dataset_name or "random",
            bench.dataset_path or "",
            _text(bench.skip_warmup),
        ]

    def results_at(self, ctx: PlanContext) -> tuple[str, str] | None:
        # bench.sh writes one JSON per concurrency into /logs/sa-bench_isl_<ISL>_osl_<OSL>/
        # (/logs is the log directory), named results_concurrency_<N>_gpus_<G>[_ctx_<P>_gen_<D>].json.
        bench = ctx.recipe.benchmark
        return ("sa-bench", f"sa-bench_isl_{_text(bench.isl)}_osl_{_text(bench.osl)}")


@register_benchmark("mlperf")
class MLPerf(Script):
    """srt-slurm's mlperf script: its client's report, summarised into `benchmark-rollup.json`."""

    def results_at(self, ctx: PlanContext) -> tuple[str, str] | None:
        return ("rollup", "benchmark-rollup.json")


# srt-slurm's other registered types whose script is `<type>/bench.sh`.  (Its `gsm8k`
# picks a script per engine and is not here yet.)
SCRIPT_TYPES = ("gpqa", "lm-eval", "longbenchv2", "mmlu", "mooncake-router", "router", "sglang-bench", "trace-replay")
for _name in SCRIPT_TYPES:
    register_benchmark(_name)(type(f"Script_{_name}", (Script,), {"__doc__": f"srt-slurm's {_name} script."}))
