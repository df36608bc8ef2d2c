"""How long `srtd plan` takes as a whole process (interpreter start, imports, load, plan, JSON).

    python benchmarks/plan_speed.py [--runs 15] [--corpus ../shared/corpus/srt-slurm]

Picks the corpus recipes that plan with the most units and the largest file, runs
`python -m srtd plan RECIPE --json` for each `--runs` times, and prints min / median
/ max wall time.  The target is under 400 ms for the largest recipe.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def candidates(corpus: Path) -> list[tuple[str, Path]]:
    sys.path.insert(0, str(REPO))
    from srtd.errors import SrtdError
    from srtd.plan import build_plan
    from srtd.recipe import load_recipes

    sized: list[tuple[int, Path]] = []
    for path in sorted(corpus.rglob("*.yaml")):
        try:
            plans = [build_plan(r) for r in load_recipes(path)]
        except SrtdError:
            continue
        sized.append((max(len(p.units) for p in plans), path))
    most_units = max(sized, key=lambda t: (t[0], t[1].stat().st_size))[1]
    largest_file = max((p for _, p in sized), key=lambda p: p.stat().st_size)
    return [("most units", most_units), ("largest file", largest_file)]


def measure(path: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "srtd", "plan", str(path), "--json"],
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus" / "srt-slurm")
    args = parser.parse_args()
    for label, path in candidates(args.corpus):
        times = measure(path, args.runs)
        print(
            f"{label:13} {path.relative_to(args.corpus)}: "
            f"min {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms, "
            f"max {max(times) * 1000:.0f} ms over {args.runs} runs"
        )


if __name__ == "__main__":
    main()
