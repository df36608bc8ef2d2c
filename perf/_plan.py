"""`srtd plan` as a whole process: the largest corpus recipes and a 1000-unit recipe."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from perf._common import REPO
from tests.command import SRTD

DEMO = REPO / "recipes" / "local" / "demo.yaml"


def corpus_dir() -> Path | None:
    """The upstream recipe corpus: $SRTD_BENCH_CORPUS, else shared/corpus/srt-slurm beside the checkout."""
    env = os.environ.get("SRTD_BENCH_CORPUS")
    candidates = [Path(env)] if env else []
    candidates += [p / "shared" / "corpus" / "srt-slurm" for p in (REPO.parent, REPO.parent.parent)]
    return next((p for p in candidates if p.is_dir()), None)


def corpus_candidates(corpus: Path) -> list[tuple[str, Path, int]]:
    """The recipe that plans into the most units, and the largest file."""
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
    most = max(sized, key=lambda t: (t[0], t[1].stat().st_size))
    largest = max(sized, key=lambda t: t[1].stat().st_size)
    return [("most units", most[1], most[0]), ("largest file", largest[1], largest[0])]


def thousand_unit_recipe(directory: Path) -> Path:
    """The local demo with 996 decode workers on 249 nodes: 1000 units."""
    yaml = YAML()
    recipe = yaml.load(DEMO.read_text())
    recipe["name"] = "bench-1000-units"
    recipe["roles"]["decode"]["workers"] = 996
    recipe["roles"]["decode"]["nodes"] = 249
    path = directory / "thousand.yaml"
    with open(path, "w") as f:
        yaml.dump(recipe, f)
    return path


def measure(path: Path, runs: int) -> dict[str, float]:
    argv = [*SRTD, "plan", str(path), "--json", "--slurm"]
    subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL)  # bytecode written, caches warm
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "runs": runs,
        "cpu_median_ms": round(statistics.median(cpu) * 1000),
        "min_ms": round(min(times) * 1000),
        "median_ms": round(statistics.median(times) * 1000),
        "max_ms": round(max(times) * 1000),
    }


def count_units(path: Path) -> int:
    import json

    out = subprocess.run(
        [*SRTD, "plan", str(path), "--json", "--slurm"], cwd=REPO, check=True, capture_output=True
    ).stdout
    return len(json.loads(out)["units"])


def plan_speed(quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 7
    rows: list[dict[str, Any]] = []
    corpus = corpus_dir()
    if corpus is not None:
        for label, path, units in corpus_candidates(corpus):
            rows.append({"recipe": f"{label}: {path.relative_to(corpus)}", "units": units,
                         "target_ms": 400, **measure(path, runs)})  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="srtd-bench-") as tmp:
        path = thousand_unit_recipe(Path(tmp))
        rows.append({"recipe": "recipes/local/demo.yaml with 996 decode workers", "units": count_units(path),
                     "target_ms": 1000, **measure(path, runs)})  # fmt: skip
    return {
        "title": "srtd plan",
        "rows": rows,
        "corpus": str(corpus) if corpus else None,
        "met": all(r["median_ms"] <= r["target_ms"] for r in rows),
    }
