"""Results: what a benchmark measured, read into one contract (docs/results.md).

The supervisor calls `collect` once a benchmark unit with a `ResultsSpec` has ended
(the spec is plan data: which reader, which path); it never names a benchmark.
`srtd results` reads `results.json` files back, tabulates and plots them.
"""

from typing import TYPE_CHECKING

from srtd._lazy import lazy_attributes
from srtd.results._where import RESULTS_FORMAT, RESULTS_NAME, resolve

if TYPE_CHECKING:
    from srtd.results._gate import collect, judge, point_problem, write_results
    from srtd.results._plot import pareto, plot
    from srtd.results._readers import READERS, Reading, document_points, per_gpu, read, sa_bench_point, sweep_values
    from srtd.results._schema import AfterReplacement, Point, Results, Stat, Verdict
    from srtd.results._table import Row, render, rows_of

# public name -> its module, imported on first use: the readers and the contract's models
# are pydantic, and a running job needs them only once a benchmark has measured something
_LAZY = {
    **dict.fromkeys(("collect", "judge", "point_problem", "write_results"), "_gate"),
    **dict.fromkeys(("pareto", "plot"), "_plot"),
    **dict.fromkeys(
        ("READERS", "Reading", "document_points", "per_gpu", "read", "sa_bench_point", "sweep_values"), "_readers"
    ),
    **dict.fromkeys(("AfterReplacement", "Point", "Results", "Stat", "Verdict"), "_schema"),
    **dict.fromkeys(("Row", "render", "rows_of"), "_table"),
}

__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "READERS",
    "RESULTS_FORMAT",
    "RESULTS_NAME",
    "AfterReplacement",
    "Point",
    "Reading",
    "Results",
    "Row",
    "Stat",
    "Verdict",
    "collect",
    "document_points",
    "judge",
    "pareto",
    "per_gpu",
    "plot",
    "point_problem",
    "read",
    "render",
    "resolve",
    "rows_of",
    "sa_bench_point",
    "sweep_values",
    "write_results",
]
