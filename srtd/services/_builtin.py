"""The built-in service kinds."""

from __future__ import annotations

import posixpath
import shlex

from srtd.context import PlanContext
from srtd.layout import Place
from srtd.recipe import ServiceConfig
from srtd.services._kind import Instance, ServiceKind, register_service
from srtd.services._telemetry import (
    EXPORTERS_FILE,
    WINDOW_ENV,
    exporters_document,
    gpu_exporter_port,
    power_sampling,
    window_dir,
)
from srtd.topology import FRONTEND_PUBLIC_PORT
from srtd.unit import HttpProbe, LogProbe, Readiness

INFRA_PLACEMENTS = frozenset({"head", "infra", "dedicated"})
LMCACHE_RPC_PORT = 8750  # vLLM's LMCache connector dials this on its own node
LMCACHE_SERVER = "lmcache-server"  # the kind a worker looks for on its own node


@register_service("generic")
class Generic(ServiceKind):
    description = "launches exactly the command the recipe writes"
    needs_command = True


class _DataDirKind(ServiceKind):
    """A server that keeps state on disk: a fresh directory each job, under the log dir locally."""

    def data_dir(self, ctx: PlanContext, svc: ServiceConfig) -> str:
        if ctx.containerized:
            return f"/tmp/{self.name}"
        return ctx.job_file(Place.SERVICE_STATE, posixpath.join(svc.name, "data"), in_step=False)

    def preamble(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> str | None:
        # Stale Raft / JetStream state from an earlier job on the node breaks startup.
        return f"rm -rf {shlex.quote(self.data_dir(ctx, svc))}"


class _DiscoveryPlane(_DataDirKind):
    """etcd and NATS: on the infra node first, critical, never pointed at themselves."""

    default_start = "infra"
    default_critical = True
    default_placement = "infra"
    placements = INFRA_PLACEMENTS
    supports_dedicated = True
    supports_external = True
    inherits_discovery = False
    readiness_ports = ("client",)
    readiness_timeout = 300


@register_service("etcd")
class Etcd(_DiscoveryPlane):
    description = "the Dynamo discovery store"
    fixed_ports = {"client": 2379, "peer": 2380}
    discovery_var = "ETCD_ENDPOINTS"
    discovery_format = "http://{address}:{port}"
    advertised_without_service = True

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        ip = ctx.address(inst.node)
        ports = self.ports(svc, ctx.port_offset)
        listen = "127.0.0.1" if ctx.local else "0.0.0.0"
        return [
            self.binary(ctx, "/configs/etcd" if ctx.containerized else "etcd"),
            "--data-dir",
            self.data_dir(ctx, svc),
            "--listen-client-urls",
            f"http://{listen}:{ports['client']}",
            "--advertise-client-urls",
            f"http://{ip}:{ports['client']}",
        ]


@register_service("nats")
class Nats(_DiscoveryPlane):
    description = "the Dynamo message bus"
    option_keys = frozenset({"max_payload_mb"})
    fixed_ports = {"client": 4222}
    discovery_var = "NATS_SERVER"
    discovery_format = "nats://{address}:{port}"

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        argv = [self.binary(ctx, "/configs/nats-server" if ctx.containerized else "nats-server")]
        argv += ["-js", "-sd", self.data_dir(ctx, svc)]
        port = self.ports(svc, ctx.port_offset)["client"]
        if port != self.fixed_ports["client"]:
            argv += ["-p", str(port)]  # NATS listens on 4222 unless told otherwise
        if ctx.local:
            argv += ["-a", "127.0.0.1"]
        if svc.options.get("max_payload_mb") is not None:
            argv += ["-c", self.config_file(ctx, svc)]
        return argv

    def config_file(self, ctx: PlanContext, svc: ServiceConfig) -> str:
        return posixpath.join(posixpath.dirname(self.data_dir(ctx, svc)), f"{svc.name}.conf")

    def preamble(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> str | None:
        wipe = super().preamble(ctx, svc, inst)
        payload = svc.options.get("max_payload_mb")
        if payload is None:
            return wipe
        # max_payload is a server-config setting, not a flag: write the file first.
        conf = shlex.quote(self.config_file(ctx, svc))
        return f"{wipe}\nmkdir -p \"$(dirname {conf})\"\nprintf 'max_payload: %sMB\\n' {int(payload)} > {conf}"

    def validate(self, svc: ServiceConfig) -> list[tuple[str, str]]:
        payload = svc.options.get("max_payload_mb")
        if payload is not None and (not isinstance(payload, int) or isinstance(payload, bool) or payload < 1):
            return [("options.max_payload_mb", f"must be a positive integer, got {payload!r}")]
        return []


@register_service(LMCACHE_SERVER)
class LMCacheServer(ServiceKind):
    description = "the LMCache multiprocess server next to vLLM or SGLang workers"
    default_start = "before_workers"
    default_critical = True
    default_placement = "workers"
    fixed_ports = {"rpc": LMCACHE_RPC_PORT, "http": 8751}

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        p = self.ports(svc, ctx.port_offset)
        argv = ["lmcache", "server", "--host", "0.0.0.0", "--port", str(p["rpc"])]
        return [*argv, "--http-host", "0.0.0.0", "--http-port", str(p["http"])]

    def readiness(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> Readiness | None:
        return Readiness(
            probe=HttpProbe(node=inst.node, port=self.ports(svc, ctx.port_offset)["http"], path="/healthcheck")
        )


def placed_nodes_of(ctx: PlanContext, svc: ServiceConfig) -> tuple[str, ...]:
    """The nodes an every-node exporter runs on."""
    return ctx.nodes.per_node_services


class _Exporter(ServiceKind):
    default_placement = "all"  # every node of the job, like srt-slurm
    option_keys = frozenset({"port"})
    shell = False  # distroless images: no bash to export variables with


@register_service("dcgm-exporter")
class DcgmExporter(_Exporter):
    description = "GPU metrics for the metrics scraper"
    container_fallback = "nvcr.io#nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"
    option_keys = frozenset({"port", "collect_interval_ms"})
    fixed_ports = {"metrics": 9401}

    def client_env(self, ctx: PlanContext, svc: ServiceConfig) -> dict[str, str]:
        # a job with a GPU exporter measures power per window: the client marks its windows there
        return {WINDOW_ENV: window_dir(ctx)}

    def readiness(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> Readiness | None:
        """Under `telemetry.required`, ready once it answers what srtd samples (its /metrics), within
        `startup_timeout_seconds`: the benchmark then starts with readings to bracket its first window,
        and an exporter that never answers fails the job at once instead of its power check at the end."""
        telemetry = ctx.recipe.telemetry
        if not (telemetry.enabled and telemetry.required):
            return super().readiness(ctx, svc, inst)
        port = self.ports(svc, ctx.port_offset)["metrics"]
        return Readiness(
            probe=HttpProbe(node=inst.node, port=port, path="/metrics"),
            timeout_seconds=telemetry.startup_timeout_seconds,
            interval_seconds=1,
        )

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if ctx.recipe.telemetry.enabled and inst.index == 0:
            # power telemetry reads this exporter: say where it listens and how it names GPUs
            port = self.ports(svc, ctx.port_offset)["metrics"]
            doc = exporters_document(ctx, placed_nodes_of(ctx, svc), port)
            ctx.files[posixpath.join(ctx.log_dir, ctx.recipe.telemetry.storage_subdir, EXPORTERS_FILE)] = doc
            ctx.power = power_sampling(ctx, placed_nodes_of(ctx, svc), port)  # and srtd samples it
        if svc.command:
            return list(svc.command)
        interval = svc.options.get("collect_interval_ms", ctx.recipe.observability.tachometer.collect_interval_ms)
        return [
            "dcgm-exporter",
            f"--collect-interval={interval}",
            "--address",
            f":{self.ports(svc, ctx.port_offset)['metrics']}",
        ]


@register_service("node-exporter")
class NodeExporter(_Exporter):
    description = "host metrics for the metrics scraper"
    container_fallback = "quay.io#prometheus/node-exporter:v1.8.2"
    fixed_ports = {"metrics": 9101}

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        collectors = ("cpu", "infiniband", "meminfo", "processes", "stat", "vmstat", "pressure", "meminfo_numa")
        return [
            "/bin/node_exporter",
            f"--web.listen-address=:{self.ports(svc, ctx.port_offset)['metrics']}",
            "--collector.disable-defaults",
            *(f"--collector.{c}" for c in collectors),
            # memory-pressure counters only: the full vmstat set is hundreds of series per node
            "--collector.vmstat.fields=^(oom_kill|pgpg|pswp|pgsteal|pg.*fault).*",
        ]


@register_service("tachometer")
class Tachometer(ServiceKind):
    """The metrics scraper: polls every exporter and worker `/metrics` into the log directory."""

    description = "the metrics scraper of observability.tachometer"
    host_native = True
    log_place = Place.TELEMETRY
    shell = False
    inherits_discovery = False

    @property
    def config_name(self) -> str:
        return "tachometer_config.toml"

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        cfg = ctx.recipe.observability.tachometer
        ctx.files[ctx.job_file(Place.TELEMETRY, self.config_name, in_step=False)] = _scrape_config(ctx)
        return [
            cfg.binary_path,
            "--config",
            ctx.job_file(Place.TELEMETRY, self.config_name, in_step=bool(svc.container)),
            "--local-dir",
            ctx.job_file(Place.JOB, posixpath.join(cfg.storage_subdir, "local"), in_step=bool(svc.container)),
            "--sync-interval",
            str(cfg.sync_interval_secs),
        ]

    def log_name(self, inst: Instance) -> str:
        return "tachometer"  # srtctl's name: it is the job's one scraper

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        return {"POLARS_MAX_THREADS": str(ctx.recipe.observability.tachometer.compaction_threads)}

    def stop_timeout(self, ctx: PlanContext, svc: ServiceConfig) -> float:
        # it compacts what it scraped after SIGTERM; srt-slurm gives it the same grace
        return float(ctx.recipe.observability.tachometer.shutdown_grace_secs)


def _scrape_config(ctx: PlanContext) -> str:
    """The scraper's targets: the exporters on every node and each worker's metrics port."""
    cfg = ctx.recipe.observability.tachometer
    lines = [f"interval_ms = {int(cfg.collect_interval_ms)}", ""]
    targets: list[tuple[str, str, str]] = []
    for node in ctx.nodes.per_node_services:  # where the exporters run (placement `all`)
        gpu = gpu_exporter_port(ctx) or ctx.port(9401)
        for name, port in (("dcgm", gpu), ("node", ctx.port(9101)), ("process", ctx.port(9256))):
            targets.append((f"{name}-{node}", node, f"http://{ctx.address(node)}:{port}/metrics"))
    for proc in ctx.all_processes:
        metrics = proc.ports.get("sys", proc.ports.get("http"))
        if proc.is_leader and metrics is not None:
            label = f"{proc.endpoint.label}-{proc.node}"
            targets.append((label, proc.node, f"http://{ctx.address(proc.node)}:{metrics}/metrics"))
    for name, node, url in targets:
        lines += ["[[endpoints]]", f"name = {_toml(name)}", f"node = {_toml(node)}", f"url = {_toml(url)}", ""]
    return "\n".join(lines)


def _toml(text: str) -> str:
    import json

    return json.dumps(text)  # a JSON string is a valid TOML basic string


@register_service("process-exporter")
class ProcessExporter(_Exporter):
    description = "per-process metrics, host-native"
    default_placement = "all"
    host_native = True
    shell = True
    option_keys = frozenset({"port", "binary"})
    fixed_ports = {"metrics": 9256}

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        binary = svc.options.get("binary") or ctx.cluster.binaries.get(self.name) or "/bin/process-exporter"
        config = ctx.job_file(Place.TELEMETRY, "process-exporter.yml", in_step=bool(svc.container))
        return [
            str(binary),
            "-config.path",
            config,
            f"-web.listen-address=:{self.ports(svc, ctx.port_offset)['metrics']}",
            "-threads=true",
            "-children=false",
            "-recheck=false",
        ]

    def skip_reason(self, ctx: PlanContext, svc: ServiceConfig) -> str | None:
        if svc.container or svc.command or svc.options.get("binary") or ctx.cluster.binaries.get(self.name):
            return None
        return "no binary: set `binaries.process-exporter` in the cluster settings or `options.binary`"


@register_service("ray")
class Ray(ServiceKind):
    description = "a Ray cluster across the service's nodes"
    default_start = "before_workers"
    default_critical = True
    default_placement = "workers"
    placements = frozenset({"workers", "head", "all"})
    option_keys = frozenset({"port", "dashboard_port", "num_gpus"})
    fixed_ports = {"gcs": 6379, "dashboard": 8265}

    def ports(self, svc: ServiceConfig, offset: int) -> dict[str, int]:
        return {
            "gcs": int(svc.options.get("port", 6379 + offset)),
            "dashboard": int(svc.options.get("dashboard_port", 8265 + offset)),
        }

    def command(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> list[str]:
        if svc.command:
            return list(svc.command)
        p = self.ports(svc, ctx.port_offset)
        gpus = str(svc.options.get("num_gpus", ctx.gpus_per_node))
        if inst.index == 0:
            ip = ctx.address(inst.node)
            return [
                "ray",
                "start",
                "--head",
                f"--node-ip-address={ip}",
                f"--port={p['gcs']}",
                "--dashboard-host=0.0.0.0",
                f"--dashboard-port={p['dashboard']}",
                f"--num-gpus={gpus}",
                "--disable-usage-stats",
                "--block",
            ]
        worker = [
            "ray",
            "start",
            "--address={pool_ip}:" + str(p["gcs"]),
            f"--node-ip-address={ctx.address(inst.node)}",
            f"--num-gpus={gpus}",
            "--disable-usage-stats",
            "--block",
        ]
        # A worker started before the head's GCS listens gives up at once: wait for it first
        # (up to five minutes), then become ray itself.
        wait = (
            "for i in $(seq 1 60); do (exec 3<>/dev/tcp/{pool_ip}/" + str(p["gcs"]) + ") 2>/dev/null && break; "
            'echo "ray worker: waiting for the head ($i/60)"; sleep 5; done; '
        )
        return ["bash", "-c", wait + "exec " + shlex.join(worker)]

    def default_env(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> dict[str, str]:
        gpus = int(svc.options.get("num_gpus", ctx.gpus_per_node))
        return {
            ctx.cluster.visible_devices_env: ",".join(str(g) for g in range(gpus)),
            "RAY_memory_monitor_refresh_ms": "0",
        }

    def readiness(self, ctx: PlanContext, svc: ServiceConfig, inst: Instance) -> Readiness | None:
        if inst.index == 0:
            return Readiness(
                probe=HttpProbe(node=inst.node, port=self.ports(svc, ctx.port_offset)["dashboard"], path="/api/version")
            )
        return Readiness(probe=LogProbe(pattern="Ray runtime started"))


def placeholder_values(ctx: PlanContext, inst: Instance, pool: tuple[str, ...], placement: str) -> dict[str, object]:
    """The names a service's command, args, env and preamble may use."""
    nodes = ctx.nodes
    values: dict[str, object] = {
        "role": placement,
        "node": inst.node,
        "node_ip": ctx.address(inst.node),
        "node_id": inst.node_id,
        "index": inst.index,
        "head_node": nodes.head,
        "head_ip": ctx.address(nodes.head),
        "infra_node": nodes.infra,
        "infra_ip": ctx.address(nodes.infra),
        "master_port": ctx.port(8700),
        "metadata_port": ctx.port(8701),
        "frontend_port": ctx.port(FRONTEND_PUBLIC_PORT),
        "port_offset": ctx.port_offset,
        "gpus_per_node": ctx.gpus_per_node,
        "pool_node": pool[0] if pool else inst.node,
        "pool_ip": ctx.address(pool[0] if pool else inst.node),
        "pool_nodes": ",".join(pool or (inst.node,)),
        "pool_ips": ",".join(ctx.address(n) for n in pool or (inst.node,)),
        "pool_node_count": len(pool) or 1,
    }
    worker = inst.worker
    if worker is not None:
        values.update(
            {
                "worker_role": worker.endpoint.role,
                "worker_index": worker.endpoint.index,
                "worker_node_rank": worker.node_rank,
                "worker_gpus": worker.visible_devices,
                "worker_gpu_count": len(worker.gpus),
            }
        )
        if "http" in worker.ports:
            values["worker_http_port"] = worker.ports["http"]
    return values
