"""The command line as a whole process: what a user waits for after typing `srtd ...`.

Each command is a fresh `python -m srtd` (interpreter start, imports, the work, exit),
timed `RUNS` times after one warm-up run; the median is the figure.  A live local job
(one `sleep` unit, its own runtime directory) is there for `ps` and `attach`.

Bytecode: an installed srtd has its `.pyc` files (pip writes them; `uv pip install`
only with `--compile`, but the first run of each module writes them unless
`PYTHONDONTWRITEBYTECODE` is set, as it is in the developers' shells).  The runner
times srtd with bytecode; the last rows time the same commands with none to read for
srtd and its dependencies (`PYTHONDONTWRITEBYTECODE=1`, `-X pycache_prefix=` a directory
that holds the bytecode of the standard library's modules the command imports, and no
other): each of those modules compiled from source at every start, as in such a shell.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perf._common import REPO
from perf._plan import corpus_dir
from tests.command import SRTD

RUNS = 10
QUICK_RUNS = 3
TARGET_QUICK_MS = 120  # --version, ps, attach: as quick as the tools beside srtd
TARGET_RECIPE_MS = 250  # validate and plan of the largest upstream example
COLD = ("srtd --version", "srtd plan LARGEST --json --slurm")  # timed again without bytecode


def largest_example(corpus: Path) -> Path | None:
    """The largest file of the corpus that srtd plans (the schema 1 recipes are refused)."""
    for path in sorted(corpus.rglob("*.yaml"), key=lambda p: p.stat().st_size, reverse=True):
        argv = [*SRTD, "plan", str(path), "--json", "--slurm"]
        if subprocess.run(argv, cwd=REPO, capture_output=True, check=False).returncode == 0:
            return path
    return None


def measure(argv: Sequence[str], runs: int, env: dict[str, str]) -> dict[str, Any]:
    """Wall and CPU time (user + system of the process) of `runs` runs after a warm-up."""
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "runs": runs,
        "min_ms": round(min(wall) * 1000),
        "median_ms": round(statistics.median(wall) * 1000),
        "max_ms": round(max(wall) * 1000),
        "cpu_median_ms": round(statistics.median(cpu) * 1000),
    }


# Run the command, then import the standard library's modules it imported, writing their
# bytecode under the pycache prefix: only srtd and its dependencies are left uncompiled.
_STDLIB_WARM = """\
import atexit, importlib, subprocess, sys, sysconfig
stdlib, prefix = sysconfig.get_paths()["stdlib"], sys.argv[1]
def warm():
    files = {n: getattr(m, "__file__", None) or "" for n, m in list(sys.modules.items())}
    names = [n for n, f in files.items() if f.startswith(stdlib) and "site-packages" not in f]
    code = "import importlib\\nfor n in %r:\\n    importlib.import_module(n)" % sorted(names)
    subprocess.run([sys.executable, "-X", "pycache_prefix=" + prefix, "-c", code], check=True)
atexit.register(warm)
sys.argv = ["srtd", *sys.argv[2:]]
from srtd.cli import main
main()
"""


def stdlib_bytecode(prefix: Path, args: Sequence[str], env: dict[str, str]) -> None:
    argv = [sys.executable, "-c", _STDLIB_WARM, str(prefix), *args]
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _live_job(root: Path, env: dict[str, str]) -> Any:
    from tests.attach.helpers import JobProcess
    from tests.supervisor.helpers import PlanMaker

    maker = PlanMaker(root=root, token="srtdbench-cli")
    maker.unit("sleeper", argv=("sleep", "600"), marker=False)
    job = JobProcess.of_plan(maker.plan(name="bench-cli"), root, SRTD_RUNTIME_DIR=env["SRTD_RUNTIME_DIR"])
    job.socket()
    job.running()
    return job


def commands(socket: str, example: Path | None) -> list[tuple[str, list[str], int]]:
    rows = [
        ("srtd --version", ["--version"], TARGET_QUICK_MS),
        ("srtd ps --local --json", ["ps", "--local", "--json"], TARGET_QUICK_MS),
        ("srtd attach --once --json JOB", ["attach", socket, "--once", "--json"], TARGET_QUICK_MS),
    ]
    if example is not None:
        rows += [
            ("srtd validate LARGEST", ["validate", str(example)], TARGET_RECIPE_MS),
            ("srtd plan LARGEST --json --slurm", ["plan", str(example), "--json", "--slurm"], TARGET_RECIPE_MS),
        ]
    return rows


def cli_speed(quick: bool) -> dict[str, Any]:
    runs = QUICK_RUNS if quick else RUNS
    corpus = corpus_dir()
    example = largest_example(corpus) if corpus is not None else None
    rows: list[dict[str, Any]] = []
    cold: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="srtd-bench-cli-", dir="/tmp") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SRTD_RUNTIME_DIR"] = str(Path(tmp) / "rt")
        job = _live_job(Path(tmp) / "job", env)
        try:
            for label, args, target in commands(str(job.socket()), example):
                rows.append({"command": label, "target_ms": target, **measure([*SRTD, *args], runs, env)})
            empty = Path(tmp) / "no-pycache"
            empty.mkdir()
            no_bytecode = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
            for label, args, target in commands(str(job.socket()), example):
                if label not in COLD:
                    continue
                stdlib_bytecode(empty, args, env)
                argv = [sys.executable, "-X", f"pycache_prefix={empty}", *SRTD[1:], *args]
                cold.append({"command": label, "target_ms": target, **measure(argv, QUICK_RUNS, no_bytecode)})
        finally:
            job.kill()
    return {
        "title": "srtd's command line",
        "rows": rows,
        "no_bytecode": cold,
        "example": str(example.relative_to(corpus)) if example is not None and corpus is not None else None,
        "met": {f"{r['command']} ≤ {r['target_ms']} ms (median)": r["median_ms"] <= r["target_ms"] for r in rows},
    }


# Where the time of each command goes (python -X importtime; tests/house/test_imports.py
# keeps the recipe models and rich out of the job verbs, and pydantic-settings out of every command).
WHERE = [
    "Where the time goes: `--version` is the interpreter and click (click alone, imported by a bare"
    " interpreter, is about 90 ms of CPU on this machine). `ps` and `attach` load no pydantic, no recipe"
    " model and no rich (a test checks it through `sys.modules`): the journal's lines and the socket's"
    " messages are plain dataclasses checked by `srtd/_shape.py`, and `ps` reads journals without the"
    " supervisor's anyio. What is left on top of click is the standard library's json, pathlib and"
    " socket, and srtd's own modules. `validate` and `plan` load the recipe models (pydantic: most of"
    " their time) and the cluster settings, which srtd reads itself: pydantic-settings, which imported"
    " asyncio and each of its settings sources, is no longer a dependency. pydantic's deferred model"
    " building (`defer_build`) was tried on the recipe sections and left out: it moves the building to"
    " the first recipe loaded, which builds every nested section anyway, and the total stayed the same.",
]


# Checked once (2026-12-04), when this page's `srtd plan` figure (316 ms, before this section
# existed) and the (0.79-0.87 s) disagreed.
EARLIER = [
    "Earlier figures: this page once gave 316 ms for `srtd plan` of the largest file (commit 4d28e08,"
    " on an Intel Xeon machine at load 0.5), where users measured 0.79-0.87 s. Bytecode does not explain"
    " it: both were with bytecode, and without it the same command costs over twice as much again. The"
    " machine does: commit 4d28e08 itself, run on the machine of this section (shared, load about 3),"
    " takes 0.82-0.88 s of CPU per `srtd plan`, as much as srtd today. Figures of whole processes only"
    " compare within one run of `nox -s bench`.",
]


def section(r: dict[str, Any]) -> list[str]:
    """The page's section (perf/_report.py places it after the peers' tables)."""
    load = f"load average {r['load_before'][0]:.1f} before, {r['load_after'][0]:.1f} after; {r['seconds']:g} s"
    m = r["machine"]
    load += f"; {m['cpus']} cores, {m['cpu']}, commit {m['commit']}"  # the page's machine row is one section's
    out = [
        "## The command line as a whole process",
        "",
        f"_{load}_",
        "",
        f"Each command as a fresh `python -m srtd` process (interpreter start, imports, the work, exit),"
        f" {r['rows'][0]['runs'] if r['rows'] else RUNS} runs after a warm-up, with bytecode cached as an"
        " installed srtd has it; `attach` and `ps` find one live local job (a `sleep` unit). LARGEST is the"
        f" largest upstream example srtd plans: {r.get('example') or 'the corpus was not found'}. Wall time"
        " grows with the load of the shared machine; the CPU time of the process (user + system) is the"
        " steadier number.",
        "",
    ]
    header = ["command", "min ms", "median ms", "max ms", "CPU median ms", "target ms", "met (median)"]

    def row(x: dict[str, Any]) -> list[Any]:
        ok = "yes" if x["median_ms"] <= x["target_ms"] else "**no**"
        return [x["command"], x["min_ms"], x["median_ms"], x["max_ms"], x["cpu_median_ms"], x["target_ms"], ok]

    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row(x)) + " |" for x in r["rows"]]
    out += ["", *WHERE, ""]
    if r.get("no_bytecode"):
        out += [
            "The same commands with no bytecode to read for srtd and its dependencies"
            " (`PYTHONDONTWRITEBYTECODE=1`, a `-X pycache_prefix` holding the standard library's only):"
            " what a shell with `PYTHONDONTWRITEBYTECODE` set pays after `uv pip install` without"
            " `--compile`, every module compiled from source at every start.",
            "",
            "| " + " | ".join(header[:-2]) + " |",
            "|" + "---|" * (len(header) - 2),
            *["| " + " | ".join(str(c) for c in row(x)[:-2]) + " |" for x in r["no_bytecode"]],
            "",
            *EARLIER,
            "",
        ]
    return out
