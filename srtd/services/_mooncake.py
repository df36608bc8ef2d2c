"""The Mooncake kinds: the master (Mooncake's own, or TensorRT-LLM's pool master), stores and donors."""

from __future__ import annotations

import posixpath
import shlex

from srtd.context import PlanContext
from srtd.layout import Place
from srtd.recipe import ServiceConfig
from srtd.services._builtin import INFRA_PLACEMENTS
from srtd.services._kind import Instance, ServiceKind, register_service
from srtd.unit import FileProbe, Readiness

# The Mooncake binaries of a TRT-LLM image import TensorRT-LLM, which must not
# join the step's MPI world: the launch clears every MPI/PMI/Slurm variable first.
_MPI_PREFIXES = "PMIX_|PMI_|OMPI_|SLURM_|SLURMD_|MPI_|OPAL_|PRTE_|HYDRA_|I_MPI_"
SCRUB_MPI_ENV = f"for var in $(env | grep -oE '^({_MPI_PREFIXES})[A-Za-z0-9_]*=' | tr -d =); do unset \"$var\"; done"
# Options that ask for TensorRT-LLM's own pool master instead of Mooncake's binary.
TRTLLM_POOL_OPTIONS = frozenset({"eviction_ratio", "master_timeout_s", "store_role"})
MOONCAKE_ADDRESS_FILE = "mooncake_master.addr"  # in the log dir: how pool members find the master
MOONCAKE_MASTER = "mooncake-master"


def trtllm_pool(svc: ServiceConfig) -> bool:
    """A mooncake-master with TRT-LLM pool options runs `trtllm-serve mooncake_master`."""
    return bool(TRTLLM_POOL_OPTIONS & set(svc.options))


def pool_run_dir(ctx: PlanContext, member: str) -> str:
    """A pool member's run directory (TRTLLM_MOONCAKE_RUN_DIR), as the step sees it."""
    return ctx.job_file(Place.JOB, posixpath.join("mooncake", member), in_step=True)


def _donor_ready(ctx: PlanContext, node: str, *, in_step: bool) -> str:
    """The file a donor writes once its memory is in the pool."""
    return ctx.job_file(Place.JOB, posixpath.join("mooncake", f"donor-{node}.ready"), in_step=in_step)


def pool_timeout_env(options: dict[str, object]) -> dict[str, str]:
    timeout = options.get("master_timeout_s")
    return {"TRTLLM_MOONCAKE_MASTER_TIMEOUT": str(timeout)} if timeout is not None else {}


@register_service(MOONCAKE_MASTER)
class MooncakeMaster(ServiceKind):
    kv_master = True
    description = "the Mooncake KV store master (Mooncake's, or TensorRT-LLM's pool master)"
    default_start = "before_workers"
    default_critical = True
    default_placement = "infra"
    placements = INFRA_PLACEMENTS
    supports_dedicated = True
    supports_external = True
    option_keys = frozenset({"store_config", "device_names_by_gpu", *TRTLLM_POOL_OPTIONS})
    fixed_ports = {"rpc": 8700, "metadata": 8701, "metrics": 8702}
    readiness_ports = ("rpc",)
    discovery_var = "MOONCAKE_MASTER"

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        p = self.ports(svc, ctx.port_offset)
        if trtllm_pool(svc):
            argv = ["trtllm-serve", "mooncake_master", "--rpc_port", str(p["rpc"]), "--metrics_port", str(p["metrics"])]
            if svc.options.get("eviction_ratio") is not None:
                argv += ["--eviction_ratio", str(svc.options["eviction_ratio"])]
            return [*argv, "--address_file", ctx.job_file(Place.JOB, MOONCAKE_ADDRESS_FILE, in_step=True)]
        return [
            "mooncake_master",
            f"--port={p['rpc']}",
            "--enable_http_metadata_server=true",
            f"--http_metadata_server_port={p['metadata']}",
            "--eviction_high_watermark_ratio=0.9",
            "--default_kv_lease_ttl=10000",
            "--rpc_thread_num=16",
            "--enable_metric_reporting=true",
            f"--metrics_port={p['metrics']}",
        ]

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        if not trtllm_pool(svc):
            return {}
        return {"TRTLLM_MOONCAKE_RUN_DIR": pool_run_dir(ctx, "master"), **pool_timeout_env(svc.options)}

    def preamble(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> str | None:
        if not trtllm_pool(svc):
            return None
        return f"mkdir -p {shlex.quote(pool_run_dir(ctx, 'master'))} && {SCRUB_MPI_ENV}"

    def srun_options(self, ctx: PlanContext, svc: ServiceConfig) -> dict[str, str]:
        return {"mpi": "none"} if trtllm_pool(svc) else {}

    def discovery_value(self, address: str, svc: ServiceConfig, offset: int) -> str | None:
        # pool members find TRT-LLM's master through its address file, not a variable
        return None if trtllm_pool(svc) else super().discovery_value(address, svc, offset)

    def validate(self, svc: ServiceConfig) -> list[tuple[str, str]]:
        ratio = svc.options.get("eviction_ratio")
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio < 1):
            return [("options.eviction_ratio", f"must be a number between 0 and 1, got {ratio!r}")]
        return []


@register_service("mooncake-donor")
class MooncakeDonor(ServiceKind):
    """Lends a decode node's host memory to TRT-LLM's Mooncake pool without serving from it."""

    description = "a TensorRT-LLM Mooncake pool donor on each decode node"
    lends_to_pool = True
    borrows_master_image = True
    waits_for = (MOONCAKE_MASTER,)
    default_start = "before_workers"
    default_critical = True
    default_placement = "decode"
    placements = frozenset({"decode"})
    option_keys = frozenset({"size", "protocol"})
    readiness_timeout = 900

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        return [
            *("trtllm-serve", "mooncake_donor"),
            *("--master_server_address", "file://" + ctx.job_file(Place.JOB, MOONCAKE_ADDRESS_FILE, in_step=True)),
            *("--segment_size", str(svc.options.get("size"))),
            *("--protocol", str(svc.options.get("protocol", "rdma"))),
            *("--ready_file", _donor_ready(ctx, inst.node, in_step=True)),
        ]

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        # INFO: the donor's diagnostics are its only trace in the log
        env = {"TRTLLM_MOONCAKE_RUN_DIR": pool_run_dir(ctx, f"donor-{inst.node}"), "TLLM_LOG_LEVEL": "INFO"}
        return {**env, **pool_timeout_env(ctx.mooncake_pool or {})}

    def preamble(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> str | None:
        ready = shlex.quote(_donor_ready(ctx, inst.node, in_step=True))
        run_dir = shlex.quote(pool_run_dir(ctx, f"donor-{inst.node}"))
        # a marker left by an earlier job must not pass the readiness probe
        return f"rm -f {ready} && mkdir -p {run_dir} && {SCRUB_MPI_ENV}"

    def srun_options(self, ctx: PlanContext, svc: ServiceConfig) -> dict[str, str]:
        return {"mpi": "none"}

    def readiness(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> Readiness | None:
        path = _donor_ready(ctx, inst.node, in_step=False)
        return Readiness(probe=FileProbe(node=inst.node, path=path), timeout_seconds=self.readiness_timeout)

    def validate(self, svc: ServiceConfig) -> list[tuple[str, str]]:
        if not svc.options.get("size") and svc.command is None:
            return [("options.size", "a mooncake-donor needs options.size (the memory it lends, e.g. 640GiB)")]
        return []


@register_service("mooncake-store")
class MooncakeStore(ServiceKind):
    description = "a standalone Mooncake store that owns a node's DRAM segment"
    needs_kv_master = True
    borrows_master_image = True
    waits_for = (MOONCAKE_MASTER,)  # a store registers with the master when it starts
    default_start = "before_workers"
    default_critical = True
    default_placement = "workers"

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        return list(svc.command or ("python", "-m", "mooncake.mooncake_store_service"))

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        return {"MOONCAKE_LOCAL_HOSTNAME": ctx.address(inst.node)}

    def forced_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        master = ctx.discovery.get("MOONCAKE_MASTER", "")
        host = master.rsplit(":", 1)[0] if master else ""
        metadata = ctx.discovery.get("MOONCAKE_METADATA", f"http://{host}:{ctx.port(8701)}/metadata")
        return {"MOONCAKE_MASTER": master, "MOONCAKE_TE_META_DATA_SERVER": metadata}
