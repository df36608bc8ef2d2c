"""The GPU Memory Service sidecar of vLLM shadow engine recovery (`engine.failover`).

One `gms` unit per worker owns the worker's weights in GPU memory; the worker's
engines (engine 0 and its standbys) map them through the sockets in the worker's
own directory under `engine.failover.shared_dir`.  The engines find that directory
and their shared failover lock through `gms_socket_dir`, so the service and the
engines never spell the path twice.
"""

from __future__ import annotations

import posixpath
import shlex

from srtd.context import PlanContext
from srtd.recipe import ServiceConfig, VLLMEngine
from srtd.services._kind import Instance, ServiceKind, register_service
from srtd.unit import LogProbe, Readiness

GMS_READY = "GMS ready:"
GMS_STARTUP_SECONDS = 120
GMS_SOCKETS_PER_DEVICE = 2  # one server per GPU opens a weights and a KV-cache socket
DEFAULT_SHARED_DIR = "/dev/shm"


def gms_socket_dir(ctx: PlanContext, role: str, index: int) -> str:
    """The node-local directory of one worker's memory service sockets and failover lock."""
    cfg = ctx.recipe.engine_for(role) if role in ctx.recipe.roles else None
    failover = cfg.failover if isinstance(cfg, VLLMEngine) else None
    shared = failover.shared_dir if failover is not None else DEFAULT_SHARED_DIR
    # srtctl's directory name: users' own takeover tests look for it
    return posixpath.join(shared, f"srtctl-{ctx.job_id}", f"{role}_{index}")


def _script(directory: str, devices: int) -> str:
    """Start one server per device, say ready once every socket exists, then live and die with them."""
    d = shlex.quote(directory)
    want = devices * GMS_SOCKETS_PER_DEVICE
    return f"""set -u
dir={d}
mkdir -p "$dir" && rm -f "$dir"/gms_*.sock || exit 1
export GMS_SOCKET_DIR="$dir"
pids=()
for device in $(seq 0 {devices - 1}); do
    python3 -m gpu_memory_service --device "$device" &
    pids+=($!)
done
stopping=0
stop() {{ stopping=1; kill -TERM "${{pids[@]}}" 2>/dev/null; }}
trap stop TERM INT
count=0
for _ in $(seq 1 {GMS_STARTUP_SECONDS}); do
    for pid in "${{pids[@]}}"; do
        kill -0 "$pid" 2>/dev/null || {{ echo "GMS server pid $pid exited during startup" >&2; stop; wait; exit 1; }}
    done
    count=$(ls "$dir"/gms_*.sock 2>/dev/null | wc -l)
    [ "$count" -ge {want} ] && break
    sleep 1
done
if [ "$count" -lt {want} ]; then
    echo "GMS startup timed out: $count of {want} sockets in $dir after {GMS_STARTUP_SECONDS}s" >&2
    stop; wait; exit 1
fi
echo "{GMS_READY} {devices} device(s), $count sockets in $dir"
# bash's `wait -n` forgets a server that exited between two checks: poll, then reap it by pid
rc=
while [ -z "$rc" ]; do
    for pid in "${{pids[@]}}"; do
        if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; rc=$?; break; fi
    done
    [ -n "$rc" ] || sleep 1
done
if [ "$stopping" = 1 ]; then wait; rm -rf -- "$dir"; exit 0; fi
echo "GMS server exited (code=$rc); stopping the rest" >&2
stop; wait
[ "$rc" = 0 ] && rc=1
exit "$rc"
"""


@register_service("gms")
class GpuMemoryService(ServiceKind):
    description = "the GPU memory service of shadow engine recovery, one per vLLM worker"
    default_start = "before_workers"
    default_critical = True
    default_placement = "workers"
    default_per = "worker"

    def _dir(self, ctx: PlanContext, inst: Instance) -> str:
        worker = inst.worker
        return gms_socket_dir(ctx, worker.endpoint.role, worker.endpoint.index) if worker else DEFAULT_SHARED_DIR

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        devices = len(inst.worker.gpus) if inst.worker else 1
        # The worker's GPUs are its visible devices, so the servers count from 0.
        return ["bash", "-c", _script(self._dir(ctx, inst), max(devices, 1))]

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        return {"GMS_SOCKET_DIR": self._dir(ctx, inst)}

    def readiness(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> Readiness | None:
        # the script's own start-up loop bounds it; the probe waits a little longer
        return Readiness(probe=LogProbe(pattern=GMS_READY), timeout_seconds=GMS_STARTUP_SECONDS + 30)
