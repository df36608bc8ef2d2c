"""Differences from srtctl that srtd makes on purpose: the one reviewed allow-list.

Each entry names the step (glob), the aspect (`missing`, `spare`, `extra`, `nodes`,
`log`, `program`, `flag`, `env`, `image`, `mount`, `srun`), the key (flag, variable, mount
or option; glob) and why.  `side="added"` matches only what srtd adds (upstream has
none), `side="dropped"` only what srtd leaves out; `when` limits an entry to the
examples it is about; `example` names the one snapshot an entry is about.

Keep it short: a difference that is not on purpose is fixed in srtd, not listed
here.  The last group lists what srtd does not launch yet: features, not drift.
"""

from __future__ import annotations

import re

from tests.fidelity._compare import Allow, Diff, Outcome


def _colocated_decode(out: Outcome) -> bool:
    decode = (out.recipe.get("roles") or {}).get("decode") or {}
    return bool(decode.get("nodes") in ("colocate", 0))


def _plus_spare_nodes(diff: Diff, out: Outcome) -> bool:
    """Upstream's node list is srtd's plus (some of) the mock's spare nodes, and nothing else."""
    ups = str(diff.upstream or "").split(",")
    ours = str(diff.srtd or "").split(",")
    return [n for n in ups if n not in out.spare] == ours


def _older_srtctl_behind_other_frontend(out: Outcome) -> bool:
    """A non-Dynamo frontend, in a snapshot of an srtctl older than the split log layout."""
    frontend = out.recipe.get("frontend") or {}
    return bool(frontend.get("type", "dynamo") != "dynamo") and out.layout == "flat"


def _named_by_node_for_the_spare_nodes(diff: Diff, out: Outcome) -> bool:
    """srtd's one instance logs as service_<name>.out; upstream, counting the mock's spare nodes as
    more instances, names each by its node (the step's own name says which)."""
    node = diff.step.rsplit("_", 1)[-1]
    ours = str(diff.srtd or "")
    return bool(out.spare) and ours.endswith(".out") and diff.upstream == f"{ours[: -len('.out')]}_{node}.out"


def _sa_bench_agg_gpus_per_node_8(diff: Diff, out: Outcome) -> bool:
    """The same sa-bench line but for TOTAL_GPUS (the 9th argument), which upstream gives as 8 x agg nodes."""
    ups, ours = str(diff.upstream or "").split(), str(diff.srtd or "").split()
    resources = out.recipe.get("resources") or {}
    if "sa-bench/bench.sh" not in str(diff.srtd) or len(ups) != len(ours) or len(ours) < 11:
        return False
    nodes = ((out.recipe.get("roles") or {}).get("agg") or {}).get("nodes", 1)
    gpus = resources.get("gpus_per_node")
    return (
        ups[:10] + ups[11:] == ours[:10] + ours[11:]
        and ours[9] == "false"  # aggregated
        and (ups[10], ours[10]) == (str(8 * nodes), str(nodes * gpus))
    )


def _miles_recipe_flags(diff: Diff, _out: Outcome) -> bool:
    """Upstream's value is the recipe's, followed by the flags a newer version of the recipe spells out."""
    flags = " --sglang-router-port 31000 --use-prometheus --prometheus-port 9090 --prometheus-run-name "
    ups, ours = str(diff.upstream or ""), str(diff.srtd or "")
    return ups.startswith(ours + flags)


def _same_s3_upload(diff: Diff, _out: Outcome) -> bool:
    """Both are a bash script that syncs the log directory to the same S3 URL (the day aside: upstream's
    snapshot writes `<date>`) with as many exclude patterns."""

    def shape(text: str) -> tuple[str, list[str]]:
        # srtd's step fills in the day itself (`url=s3://.../"$day"/<job>/`); upstream's snapshot writes <date>
        text = text.replace('"$day"', "<date>")
        urls = [re.sub(r"/\d{4}-\d{2}-\d{2}/", "/<date>/", u) for u in re.findall(r"s3://[^\s'\"$]+", text)]
        return max(urls, key=len, default=""), re.findall(r"\((\d+) exclude pattern", text)

    ups, ours = str(diff.upstream or ""), str(diff.srtd or "")
    both = (ups, ours)
    return all(t.startswith("bash -c ") and "s3 sync" in t for t in both) and shape(ups) == shape(ours) != ("", [])


# Where a colocated decode worker lands decides its node, GPUs and per-node ports.
_PLACEMENT_KEYS = (
    "|port|dist-init-addr|device-ids|dump-config-to|decode|worker-urls|kv-transfer-config|CUDA_VISIBLE_DEVICES"
)

# What the mock does that srtctl on a real allocation does not (upstream-launch/README.md):
# its two spare nodes and its colocate oddity.  `scripts/fidelity.py`'s "real job" view
# leaves these out of srtctl's own flags and variables, on both sides of the share.
MOCK: tuple[Allow, ...] = (
    Allow("*", "spare", "", "the mock adds two spare nodes and runs per-node services there; a real job has none"),
    Allow(
        "<unnamed benchmark>",
        "env",
        "SRT_SERVICE_*_EXPORTER_*",
        "the exporters run on every allocated node: the mock's spare nodes are counted upstream",
    ),
    Allow(
        "<unnamed benchmark>",
        "env",
        "SRT_WORKER_NODES",
        "srtctl lists every allocated node outside a pool as a worker node: the mock's spare nodes too",
        values=_plus_spare_nodes,
    ),
    Allow(
        "service_*",
        "log",
        "",
        "a per-node service srtd runs once is several instances upstream (the mock's spare nodes), each "
        "logging as service_<name>_<node>.out; srtd names one instance's log service_<name>.out, as srtctl does",
        values=_named_by_node_for_the_spare_nodes,
    ),
    Allow(
        "benchmark",
        "extra",
        "",
        "the mock's run stopped before the benchmark of this pool-only job",
        example="features__torchrun-pool",
    ),
    # the colocate oddity (README: "follow the recipe")
    Allow(
        "decode_*|*router*|smg_*",
        "nodes|log|flag|env",
        _PLACEMENT_KEYS,
        "the mock puts a colocated decode worker on a spare node; srtd follows the recipe (prefill's node), "
        "and that node decides its GPUs and per-node ports",
        when=_colocated_decode,
    ),
)

# What only older srtctl versions launched, where the newest srtctl (its code, and its newest
# snapshots) launches what srtd does.  `scripts/fidelity.py`'s "newest" view leaves these out of
# srtctl's own variables, on top of the mock's.
SUPERSEDED: tuple[Allow, ...] = (
    Allow(
        "agg_*|prefill_*|decode_*",
        "env",
        "DYN_*|ETCD_ENDPOINTS",
        "some older srtctl versions gave workers behind a non-Dynamo frontend the Dynamo environment (nothing "
        "there reads it); the newest gives it only where the frontend launches Dynamo workers (its worker "
        "environment defaults), as do its newest snapshots (sglang-direct-agg, trtllm-serve-agg) and its later "
        "snapshots of pools.yaml and profiling.yaml themselves, and srtd follows it; for one frontend kind and "
        "layout the snapshots disagree among themselves (test_snapshot_versions.py), so no rule matches both",
        side="dropped",
        when=_older_srtctl_behind_other_frontend,
    ),
)

ALLOWED: tuple[Allow, ...] = (
    *MOCK,
    *SUPERSEDED,
    # --- srtd's own choices
    Allow("*", "env", "SRTD_*", "srtd's job id and log dir, for programs that want them", side="added"),
    Allow(
        "<unnamed host_setup_*>|<unnamed host_teardown_*>",
        "env",
        "*",
        "srtctl's host steps inherit the recipe's `environment:` from the job script that exports it; "
        "srtd sets it on the step, as on every unit, so the plan shows it and the local launcher passes it",
        side="added",
    ),
    Allow(
        "*_*_node-*",
        "env",
        "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS",
        "srtd probes a Dynamo worker's /health, which needs health to follow the generate endpoint",
        side="added",
    ),
    Allow("*", "program", "python-vs-python3", "srtd calls python3 everywhere; the same interpreter in these images"),
    Allow(
        "service_nats",
        "program",
        "",
        "this srtctl put JetStream into the config file; srtd passes -js -sd as flags (same server)",
        example="features__infra-services",
    ),
    Allow(
        "<unnamed benchmark>",
        "program",
        "",
        "sa-bench's total-GPU argument of an aggregated job: srtctl's rule is agg nodes x resources.gpus_per_node, "
        "and srtd follows it; this srtctl counted 8 per node whatever the recipe's gpus_per_node said "
        "(docs/engines.md, the benchmark client)",
        values=_sa_bench_agg_gpus_per_node_8,
    ),
    Allow(
        "agg_*",
        "env",
        "DYN_HEALTH_CHECK_ENABLED",
        "srtd turns Dynamo's own engine health check off in every vLLM worker (it probes /health itself)",
        side="added",
    ),
    Allow(
        "service_mooncake-donor",
        "program",
        "",
        "srtctl wraps the donor in its diagnostics helper from runtime_scripts; srtd runs trtllm-serve's donor itself",
    ),
    Allow(
        "prefill_*|decode_*|agg_*",
        "program",
        "",
        "the Mooncake pool's provisioning wrapper around dynamo.trtllm: srtd's own few lines, the same TRT-LLM call",
        values=lambda d, _o: all("maybe_provision_pool" in str(v) for v in (d.upstream, d.srtd)),
    ),
    Allow(
        "*_*_node-*|frontend_*",
        "program",
        "",
        "the Nsight Systems window program is srtd's own, written into the job's log directory (every container "
        "mounts it), not srtctl's runtime_scripts copy; the same `worker --spec ... --` call",
        values=lambda d, _o: all(str(v).endswith("/nsys_window.py worker") for v in (d.upstream, d.srtd)),
    ),
    Allow(
        "<unnamed benchmark>",
        "env",
        "SRT_NSYS_CONTROL_SCRIPT",
        "the client's window hooks are srtd's own program in the job's log directory (same start/stop commands)",
        values=lambda d, _o: all(str(v).endswith("/nsys_window.py") for v in (d.upstream, d.srtd)),
    ),
    Allow(
        "<unnamed postprocess>",
        "program",
        "",
        "the log upload (`reporting.s3`) is srtd's own script (docs/results.md, uploading the logs to S3): the same "
        "aws s3 sync of the log directory to the same URL with the same excludes, status file and exit code 11",
        values=_same_s3_upload,
    ),
    # --- mounts srtd does not need
    Allow(
        "*",
        "mount",
        "<repo>/src/srtctl/runtime_scripts",
        "srtctl's helper scripts; srtd runs none of them (its Nsight window program is written into the log dir)",
    ),
    Allow(
        "*",
        "mount",
        "<repo>/src/srtctl/benchmarks/scripts",
        "srtd mounts the benchmark scripts only into the benchmark client that runs them",
    ),
    # --- snapshots of older srtctl commits
    *(
        Allow(
            "<unnamed benchmark>", "env", key, "srtctl's newer benchmark contract; this snapshot is older", side="added"
        )
        for key in (
            "SRT_*_IPS",
            "SRT_*_ENDPOINTS",
            "SRT_SERVICE_*",
            "AIPERF_SERVER_METRICS_URLS",
            "SRT_GPUS_PER_NODE",
            "SRT_WORKER_NODES",
        )
    ),
    # --- not launched by srtd yet (features, each a follow-up; docs/engines.md lists them)
    Allow(
        "<unnamed benchmark>",
        "env",
        "SRT_SERVICE_PROCESS_EXPORTER_*",
        "srtctl names the process-exporter it skipped for want of a binary; srtd names only services that run, "
        "and this one runs once the cluster names its binary (then the client gets these variables)",
        side="dropped",
    ),
    Allow(
        "<unnamed telemetry_*>",
        "missing",
        "",
        "srtd runs the GPU exporter as its dcgm-exporter service, one unit per node (service_dcgm-exporter"
        "[_<node>], listed as extra); srtctl as one step over all nodes named by its log (docs/services.md)",
    ),
    Allow(
        "<unnamed benchmark>",
        "env",
        "SRT_MEASUREMENT_WINDOW_DIR",
        "srtd follows the newest srtctl: the client marks its measurement windows whenever a GPU exporter runs; "
        "the older snapshots predate the variable (docs/services.md, power telemetry)",
        side="added",
    ),
    Allow(
        "<unnamed clock_sync_*>",
        "program",
        "",
        "srtd's own clock check (docs/services.md, the clock check): the same time sources in the same order "
        "(timedatectl, chronyc, ntpq, the kernel's adjtimex), in its own words",
        values=lambda d, _o: all(
            str(v).startswith("bash -c ") and all(t in str(v) for t in ("timedatectl", "chronyc", "ntpq", "adjtimex"))
            for v in (d.upstream, d.srtd)
        ),
    ),
    Allow(
        "service_*-exporter|service_*-exporter_*",
        "extra",
        "",
        "srtd keeps the tachometer's exporters (one instance, or one per node) when telemetry is on",
    ),
    Allow(
        "<unnamed benchmark>",
        "env",
        "MILES_SCRIPT_EXTRA_ARGS",
        "the snapshot's recipe version writes the router and Prometheus flags into MILES_SCRIPT_EXTRA_ARGS "
        "itself (srtctl's core knows nothing of Miles); the stored example is the version before",
        values=_miles_recipe_flags,
    ),
)
