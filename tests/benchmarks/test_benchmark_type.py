"""`benchmark.type` is checked before the job starts: a name no row has, and a script that is not there.

Both used to pass `srtd validate` and fail only after the stack was up (exit 127,
`bench.sh: No such file`): on a cluster, after the queue wait and the model load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from srtd.benchmarks import benchmark_problems, missing_script
from tests.command import REPO, run_srtd

DEMO = REPO / "recipes" / "local" / "demo.yaml"
KNOWN = (
    "aiperf, custom, gpqa, lm-eval, longbenchv2, manual, mlperf, mmlu, mooncake-router, router, sa-bench, "
    "sglang-bench, toy, trace-replay"
)


def demo_with(tmp_path: Path, benchmark_type: str) -> Path:
    text = DEMO.read_text(encoding="utf-8")
    assert "benchmark:\n  type: toy\n" in text
    path = tmp_path / "r.yaml"
    path.write_text(text.replace("benchmark:\n  type: toy\n", f"benchmark:\n  type: {benchmark_type}\n"))
    return path


def benchmark_line(path: Path) -> int:
    return path.read_text(encoding="utf-8").splitlines().index("benchmark:") + 2


@pytest.mark.parametrize("verb", [("validate",), ("plan",), ("plan", "--json"), ("run",), ("submit", "--dry-run")])
def test_a_misspelt_benchmark_type_is_refused_by_every_verb_before_anything_starts(
    tmp_path: Path, verb: tuple[str, ...]
) -> None:
    recipe = demo_with(tmp_path, "sabench")
    result = run_srtd(*verb, str(recipe), cwd=tmp_path)
    said = (
        f"{recipe}:{benchmark_line(recipe)}:3 benchmark.type: unknown benchmark 'sabench'; "
        f"did you mean 'sa-bench'? known: {KNOWN}"
    )
    assert result.returncode == 2
    assert [line.removeprefix("srtd: ") for line in result.stderr.splitlines() if "benchmark.type" in line] == [said]
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [recipe]  # nothing ran: no log directory


def test_srt_slurm_benchmark_types_are_its_registered_ones() -> None:
    assert benchmark_problems("sa-bench") == benchmark_problems("mmlu") == benchmark_problems("manual") == []
    ((path, message),) = benchmark_problems("my-own-bench")
    assert path == "benchmark.type"
    assert message == f"unknown benchmark 'my-own-bench'; known: {KNOWN}"


def test_a_missing_script_is_refused_where_the_scripts_directory_is_visible(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    (scripts / "sa-bench").mkdir(parents=True)
    (scripts / "sa-bench" / "bench.sh").write_text("#!/bin/bash\n")
    cluster = tmp_path / "srtslurm.yaml"
    cluster.write_text(f"benchmark_scripts: {scripts}\n")
    recipe = demo_with(tmp_path, "mmlu")
    for verb in (("validate",), ("plan",), ("submit", "--dry-run")):
        result = run_srtd(*verb, str(recipe), "--cluster-config", str(cluster), cwd=tmp_path)
        assert result.returncode == 2, verb
        assert result.stderr.splitlines()[-1].removeprefix("srtd: ") == (
            f"{recipe}:{benchmark_line(recipe)}:3 benchmark.type: benchmark 'mmlu' has no script: "
            f"{scripts}/mmlu/bench.sh does not exist"
        )
    sa_bench = demo_with(tmp_path, "sa-bench")
    result = run_srtd("validate", str(sa_bench), "--cluster-config", str(cluster), cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_a_scripts_directory_this_machine_does_not_see_is_not_checked(tmp_path: Path) -> None:
    assert missing_script("mmlu", str(tmp_path / "only-on-compute-nodes")) is None
    assert missing_script("mmlu", None) is None
    assert missing_script("toy", str(tmp_path)) is None  # not a script row
    problem = missing_script("mmlu", str(tmp_path))
    assert problem is not None
    assert (problem.path, problem.message) == (
        "benchmark.type",
        f"benchmark 'mmlu' has no script: {tmp_path}/mmlu/bench.sh does not exist",
    )
