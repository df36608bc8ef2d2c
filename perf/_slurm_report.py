"""The Slurm sections of docs/performance.md and their plot (from perf/results/slurm-*.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NAMES = ("slurm-launch", "slurm-exits", "slurm-teardown", "slurm-srun")

INTRO = (
    "On the dev cluster (`scripts/slurm-dev-cluster up 4`: four slurmd on this one machine,"
    " 2 CPUs each). Every size is one batch job of 4 nodes;"
    " inside it the same N steps run twice: from a plain loop of the exact srun lines srtd"
    " would run (`srtd.launch.with_srun_lines`, started with `subprocess.Popen`, no srtd code"
    " on the path: the floor), and under `python -m srtd run plan.json` as a process of its"
    " own. Each task is a shell that prints `running <epoch>` and sleeps; the steps are"
    " spread round-robin over the 4 nodes. Slurm's own processes cost about 16 MB per step,"
    " so 400 steps are about 6.4 GB: the largest size this 24 GB machine takes beside the"
    " others' work. Run under `flock /tmp/srtd-slurm.lock`."
)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _when(r: dict[str, Any]) -> str:
    return ", ".join(sorted({s["when"] for s in r["sizes"].values()}))


def launch(r: dict[str, Any]) -> list[str]:
    rows = []
    for n, s in r["sizes"].items():
        o = s["srtd"]
        rows.append([
            n, f"{s['floor_parallel']['launch_s']:.2f}", f"{s['floor_serial']['launch_s']:.2f}",
            f"{o['launch_s']:.2f}", f"{o['startup_s']:.2f}", f"{o['launch_from_journal_s']:.2f}",
            f"{s['ratio_parallel']:.2f}", f"{s['ratio_parallel_from_journal']:.2f}", f"{s['ratio_serial']:.2f}",
            "yes" if o["order_kept"] else "**no**",
        ])  # fmt: skip
    out = [
        "## Slurm: launch",
        "",
        f"_measured {_when(r)}_",
        "",
        INTRO,
        "",
        "Job start → every step's task running (the latest `running` stamp). The graph: a"
        " `head` unit, and N - 1 workers that start after it has started. The floor does the"
        " same: the head, then (parallel) every other srun line at once, or (serial) each once"
        " the previous task runs. srtd's time counts from spawning `srtd run` (its interpreter"
        " start and imports are the *startup* column) and, apart, from its journal's job"
        " `starting`. *Order kept*: no worker's `starting` event, and no worker's task, before"
        " the head's. Target: ≤ 1.1 x the parallel floor at every N.",
        "",
        *_table(
            [
                "N",
                "floor parallel s",
                "floor serial s",
                "srtd s",
                "startup s",
                "srtd from journal s",
                "srtd / parallel",
                "journal / parallel",
                "srtd / serial",
                "order kept",
            ],
            rows,
        ),
        "![launch and teardown against N](img/perf-slurm.png)",
        "",
    ]
    big = r["sizes"].get("400", {}).get("srtd", {}).get("cost")
    if big:
        out += [
            "### srtd's own cost with 400 steps running",
            "",
            f"Over {big['window_s']} s, 3 s after the last task ran: srtd **{big['srtd_cpu_percent']} %** of one"
            f" core, RSS **{big['srtd_rss_mib']} MiB**, {big['srtd_threads']} threads. Its srun clients"
            f" ({big['srun_processes']} processes: srun forks a second process per step) used"
            f" {big['srun_cpu_percent']} % of a core, {big['srun_threads']} threads, RSS"
            f" {big['srun_rss_mib']} MiB summed ({big['srun_pss_mib']} MiB PSS, the shared libraries"
            " counted once): about 50 times srtd's own memory, 9.2 MiB RSS (3.6 MiB PSS) per step"
            " before slurmstepd's share on the node. srtd starts its srun lines as fast as the plain"
            " loop does (both are a `Popen` per step; the differences in the table are run-to-run noise).",
            "",
        ]
    return out


def srun(r: dict[str, Any]) -> list[str]:
    window = next(iter(r["shapes"].values()))["window_s"]
    rows = [
        [label, s["processes"], s["threads"], s["rss_mib"], s["pss_mib"], s["cpu_percent"]]
        for label, s in r["shapes"].items()
    ]
    return [
        "### What an srun client costs, by the shape of its line",
        "",
        f"_measured {r['when']}_",
        "",
        f"{r['n']} plain srun clients of each shape, their tasks asleep, over {window} s:"
        " srtd's exact line; a minimal one (`--jobid --overlap -w -N1 -n1 --output`, no"
        " `--open-mode`, `--job-name`, bash wrapper); srtd's line with `--threads=1`.",
        "",
        *_table(["shape", "processes", "threads", "RSS MiB", "PSS MiB", "CPU % of a core"], rows),
        "The shape makes no difference: an srun client is a fixed ~4.6 MiB RSS (~1.8 MiB PSS) and"
        " 2-3 threads per process, two processes per step, idle on the CPU. Fewer options or"
        " `--threads=1` (it caps the threads that *launch* the step, which are gone by then) do not"
        " reduce it; only fewer srun clients would (one client per multi-task step rather than one"
        " per rank, where a recipe allows it).",
        "",
    ]


def exits(r: dict[str, Any]) -> list[str]:
    rows = []
    for n, s in r["sizes"].items():
        f, o = s["floor"], s["srtd"]
        rows.append([
            n, f"{f['p50_ms']:g} / {f['p99_ms']:g} / {f['max_ms']:g}",
            f"{o['p50_ms']:g} / {o['p99_ms']:g} / {o['max_ms']:g}",
            f"{o['p99_ms'] / f['p99_ms']:.2f}", "yes" if s["met"] else "**no**",
        ])  # fmt: skip
    return [
        "## Slurm: exit → decision",
        "",
        f"_measured {_when(r)}_",
        "",
        "N steps running; each task blocks reading its own FIFO, and the benchmark opens and"
        " closes the FIFOs one at a time, 20 ms apart, in a shuffled order; the task then prints"
        " `exit <epoch>` and exits 0. The floor: the moment the plain srun client returns"
        " (`os.wait()` in the benchmark). srtd: its journal's `exited` event. Target: p99 ≤ 100"
        " ms at 400, or within 20 % of the floor.",
        "",
        *_table(["N", "floor p50 / p99 / max ms", "srtd p50 / p99 / max ms", "p99 srtd / floor", "target"], rows),
        "The p50 is the floor's: srtd sees an srun client's exit on its pidfd, no polling. The tail"
        " follows the machine's load more than N: an earlier run at load average 20 measured a p99"
        " of 148 ms for the floor and 187 ms for srtd at 400 (both over 100 ms; srtd 1.26 x the floor),"
        " when srtd's one event loop waits for a core behind other work on the machine.",
        "",
    ]


def teardown(r: dict[str, Any]) -> list[str]:
    rows = []
    for n, s in r["sizes"].items():
        rows.append([
            n, f"{s['sum_of_tier_maxima_s']:.2f}", f"{s['floor']['teardown_s']:.2f}", f"{s['srtd']['teardown_s']:.2f}",
            f"{s['floor_overhead_s']:+.2f}", f"{s['overhead_s']:+.2f}",
            f"{s['srtd']['teardown_s'] - s['floor']['teardown_s']:+.2f}",
        ])  # fmt: skip
    return [
        "## Slurm: teardown",
        "",
        f"_measured {_when(r)}_",
        "",
        "N steps over 3 tiers (unit i in tier i mod 3); each task traps SIGTERM and exits a"
        " known 0.1-1.0 s later. From the stop request (SIGTERM to `srtd run`) to the last step"
        " gone from `squeue --steps` (polled every 0.1 s), against Σ over tiers of the slowest"
        " unit, and against plain tools doing the same: per tier one `scancel --signal=TERM"
        " --full` naming the tier's steps, then every srun client of the tier returned. Target:"
        " ≤ 1 s over Σ at 400.",
        "",
        *_table(["N", "Σ tier maxima s", "plain scancel s", "srtd s", "plain - Σ", "srtd - Σ", "srtd - plain"], rows),
    ]


def plot(results: dict[str, dict[str, Any]], images: Path) -> None:
    """Launch and teardown time against N, srtd and the floors (matplotlib already imported by the caller)."""
    import matplotlib.pyplot as plt

    lr, tr = results.get("slurm-launch"), results.get("slurm-teardown")
    if not lr and not tr:
        return
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    if lr:
        ns = [int(n) for n in lr["sizes"]]
        s = list(lr["sizes"].values())
        axes[0].plot(ns, [x["floor_parallel"]["launch_s"] for x in s], "o--", label="plain srun, parallel")
        axes[0].plot(ns, [x["floor_serial"]["launch_s"] for x in s], "s:", label="plain srun, serial")
        axes[0].plot(ns, [x["srtd"]["launch_s"] for x in s], "o-", label="srtd run")
        axes[0].set_title("launch: job start → all running", fontsize=9)
    if tr:
        ns = [int(n) for n in tr["sizes"]]
        s = list(tr["sizes"].values())
        axes[1].plot(ns, [x["sum_of_tier_maxima_s"] for x in s], "k:", label="Σ tier maxima")
        axes[1].plot(ns, [x["floor"]["teardown_s"] for x in s], "o--", label="plain scancel per tier")
        axes[1].plot(ns, [x["srtd"]["teardown_s"] for x in s], "o-", label="srtd run")
        axes[1].set_title("teardown: stop → last step gone", fontsize=9)
    for ax in axes:
        ax.set_xlabel("steps (N)")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(images / "perf-slurm.png", dpi=110)
    plt.close(fig)


# Why a Slurm target is missed, as measured (docs/performance.md's list of shortfalls).
WHY = {
    "slurm-launch": "counted from its journal's job start srtd is within 1.1 x the parallel floor at every"
    " N (the from-journal column); counted from the spawn of `srtd run` it is not at 50 and 200, because"
    " the interpreter's start and srtd's imports (the startup column, about 0.4 s) are part of srtd's time"
    " and the floor at 50 steps is well under a second",
    "slurm-teardown": "Slurm itself takes seconds beyond the tasks' own delays to end hundreds of steps"
    " (plain scancel, tier by tier, is the plain - Σ column: about 4.7 s at 400), so no supervisor can"
    " be within 1 s of Σ there; srtd's overhead over that plain-tool floor is the srtd - plain column"
    " (0.0 s at 50 and 200, +0.4 s at 400 in this run). A traced 400-step teardown shows where Slurm's"
    " time goes: each tier's tasks end within their 1 s delay, but their srun clients return over the"
    " next 1 to 6 s while Slurm completes the steps one by one, and srtd signals the next tier within"
    " 10 ms of the last one returning",
}

SECTIONS = {"slurm-launch": launch, "slurm-srun": srun, "slurm-exits": exits, "slurm-teardown": teardown}
