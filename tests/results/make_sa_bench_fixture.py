"""Writes data/sa-bench_isl_128_osl_128/: result files in sa-bench's real format.

The keys are the ones srt-slurm's sa-bench `benchmark_serving.py --save-result` writes (its
setup keys, then the result of `benchmark()` with mean/median/std/p99 of ttft, tpot, itl and
e2el, as `--percentile-metrics ttft,tpot,itl,e2el` selects), in files named the way its
`bench.sh` names them (`results_concurrency_<N>_gpus_<G>_ctx_<P>_gen_<D>.json`), beside the
`.pytorch.json` copy `save_to_pytorch_benchmark_format` writes.  The numbers are made up.
Run it from this directory to regenerate the fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "data" / "sa-bench_isl_128_osl_128"
Stats = tuple[float, float, float]


def result(c: int, completed: int, prompts: int, out: int, duration: float, stats: dict[str, Stats]) -> dict[str, Any]:
    failed = prompts - completed
    doc: dict[str, Any] = {
        "date": "20261201-120000",
        "backend": "dynamo",
        "model_id": "Qwen/Qwen3-0.6B",
        "tokenizer_id": "/model/",
        "best_of": 1,
        "num_prompts": prompts,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": c,
        "duration": duration,
        "completed": completed,
        "total_input_tokens": completed * 120,
        "total_output_tokens": out,
        "request_throughput": completed / duration,
        "request_goodput": None,
        "output_throughput": out / duration,
        "total_token_throughput": (out + completed * 120) / duration,
        "input_lens": [120] * prompts,
        "output_lens": [out // max(completed, 1)] * completed + [0] * failed,
        "ttfts": [stats["ttft"][1] / 1000] * completed + [0.0] * failed,
        "itls": [[stats["itl"][1] / 1000]] * completed + [[]] * failed,
        "generated_texts": ["text"] * completed + [""] * failed,
        "errors": [""] * completed + ["ClientResponseError: 503, message='Service Unavailable'"] * failed,
    }
    for name, (mean, median, p99) in stats.items():
        doc[f"mean_{name}_ms"] = mean
        doc[f"median_{name}_ms"] = median
        doc[f"std_{name}_ms"] = round(mean / 10, 3)
        doc[f"p99_{name}_ms"] = p99
    return doc


POINTS = {
    4: result(
        4,
        40,
        40,
        4800,
        12.5,
        {"ttft": (35.1, 33.0, 61.2), "tpot": (7.9, 7.8, 9.4), "itl": (7.9, 7.6, 14.0), "e2el": (980.0, 970.5, 1120.3)},
    ),
    16: result(
        16,
        158,
        160,
        18960,
        20.25,
        {
            "ttft": (80.4, 75.2, 190.7),
            "tpot": (11.2, 11.0, 14.9),
            "itl": (11.1, 10.7, 25.3),
            "e2el": (1420.6, 1400.1, 1801.9),
        },
    ),
}

if __name__ == "__main__":
    HERE.mkdir(parents=True, exist_ok=True)
    for c, doc in POINTS.items():
        (HERE / f"results_concurrency_{c}_gpus_8_ctx_4_gen_4.json").write_text(json.dumps(doc))
    pytorch = [{"benchmark": {"name": "vLLM benchmark", "extra_info": {}}, "model": {"name": "Qwen/Qwen3-0.6B"}}]
    (HERE / "results_concurrency_4_gpus_8_ctx_4_gen_4.pytorch.json").write_text(json.dumps(pytorch))
