"""Where a job's results are: the names the supervisor needs before anything is read.

Apart from the readers and the contract's models (pydantic), so that a running job that
has not yet ended a benchmark loads neither (issue #36).
"""

from __future__ import annotations

from pathlib import Path

from srtd.unit import ResultsSpec

RESULTS_FORMAT = 1
RESULTS_NAME = "results.json"


def resolve(spec: ResultsSpec, log_dir: Path) -> Path:
    """The file or directory the benchmark leaves its measurements in."""
    path = Path(spec.path)
    return path if path.is_absolute() else log_dir / path
