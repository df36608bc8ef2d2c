"""From an effective service to its units: placement, instances, env, probes, source builds."""

from __future__ import annotations

import posixpath

from srtd.context import PlanContext, render
from srtd.errors import PlanError, Problem
from srtd.layout import Place
from srtd.recipe import LivenessSpec, ServiceReadiness
from srtd.services._builtin import placeholder_values
from srtd.services._kind import Instance
from srtd.services._resolve import EffectiveService
from srtd.topology import ROLE_ORDER, Process
from srtd.unit import (
    Condition,
    Edge,
    FileProbe,
    HttpProbe,
    Liveness,
    LogProbe,
    Readiness,
    Srun,
    TcpProbe,
    Unit,
    UnitKind,
)

CLONE_TIMEOUT_SECONDS = 3 * 600 + 60
# Clone on the bare host (git and the network are host concerns); every value
# arrives as a positional parameter, never spliced into the script.
_CLONE_SCRIPT = (
    'set -euo pipefail; url=$1 dest=$2 rev=$3; rm -rf "$dest"; mkdir -p "$dest"; cd "$dest"; '
    "export GIT_TERMINAL_PROMPT=0; "
    'timeout 600s git -c http.version=HTTP/1.1 init -q . && git remote add origin "$url" && '
    'timeout 600s git -c http.version=HTTP/1.1 fetch --filter=blob:none origin "$rev" && '
    "timeout 600s git checkout -q FETCH_HEAD"
)


def placed_nodes(ctx: PlanContext, eff: EffectiveService) -> tuple[str, ...]:
    """The nodes a service runs on (one instance per node unless it is per worker)."""
    nodes = ctx.nodes
    if eff.pool is not None:
        if eff.pool not in nodes.pools:
            field = "placement.pool" if eff.config.nodes is None else "nodes"
            path = f"{eff.path}.{field}" if eff.position is not None else ""
            raise PlanError(Problem(f"service {eff.name!r}: pool {eff.pool!r} has no nodes", path=path))
        return nodes.pools[eff.pool]
    placement = eff.placement
    if placement == "head":
        return (nodes.head,)
    if placement in ("infra", "dedicated"):
        return (nodes.infra,)
    if placement == "workers":
        return nodes.workers
    if placement == "compute":
        return nodes.compute
    if placement == "all":
        return nodes.per_node_services
    # a role: the distinct nodes its workers use, in worker order
    return tuple(dict.fromkeys(p.node for p in ctx.processes.get(placement, [])))


def instances(ctx: PlanContext, eff: EffectiveService) -> list[Instance]:
    nodes = placed_nodes(ctx, eff)
    compute = ctx.nodes.compute
    if eff.per == "worker":
        roles = ROLE_ORDER if eff.placement == "workers" else (eff.placement,)
        procs: list[Process] = [p for r in roles for p in ctx.processes.get(r, []) if p.node in nodes]
        procs.sort(key=lambda p: (nodes.index(p.node), p.endpoint.role, p.endpoint.index, p.node_rank))
        return [
            Instance(
                f"service_{eff.name}_{p.endpoint.role}_{p.endpoint.index}_{p.node}",
                p.node,
                i,
                compute.index(p.node) if p.node in compute else i,
                p,
            )
            for i, p in enumerate(procs)
        ]
    out = []
    for i, node in enumerate(nodes):
        name = f"service_{eff.name}" if len(nodes) == 1 else f"service_{eff.name}_{node}"
        out.append(Instance(name, node, i, compute.index(node) if node in compute else i))
    return out


def readiness_of(spec: ServiceReadiness, node: str, log_dir: str = "") -> Readiness:
    probe: TcpProbe | HttpProbe | LogProbe | FileProbe
    if spec.file is not None:
        path = posixpath.join(log_dir, spec.file.path.replace("{node}", node))
        probe = FileProbe(node=node, path=path)
    elif spec.port is not None:
        probe = TcpProbe(node=node, port=spec.port)
    elif spec.tcp is not None:
        probe = TcpProbe(node=node, port=spec.tcp.port)
    elif spec.http is not None:
        probe = HttpProbe(node=node, port=spec.http.port, path=spec.http.path, status=spec.http.status)
    else:
        assert spec.log is not None
        probe = LogProbe(pattern=spec.log.pattern)
    return Readiness(probe=probe, timeout_seconds=spec.timeout_seconds, interval_seconds=spec.interval_seconds)


def liveness_of(
    spec: LivenessSpec | None, readiness: Readiness | None, node: str, service: str, path: str = ""
) -> Liveness | None:
    """A service's liveness: `default` and a port-less tcp/http probe reuse its readiness probe's port."""
    if spec is None:
        return None
    ready = readiness.probe if readiness is not None else None
    ready_port = ready.port if isinstance(ready, TcpProbe | HttpProbe) else None
    where = f"service {service!r}: liveness"
    probe: TcpProbe | HttpProbe | LogProbe | None = None
    if spec.default:
        if not isinstance(ready, TcpProbe | HttpProbe):
            raise PlanError(
                Problem(f"{where}: `default` reuses a tcp or http readiness probe, and it has none; name a probe", path)
            )
        probe = ready
    elif spec.log is not None:
        probe = LogProbe(pattern=spec.log.pattern)
    elif spec.http is not None or spec.tcp is not None or spec.port is not None:
        written = spec.port or (spec.tcp.port if spec.tcp else None) or (spec.http.port if spec.http else None)
        port = written or ready_port
        if port is None:
            raise PlanError(Problem(f"{where}: give the probe a port (its readiness probe has none to reuse)", path))
        if spec.http is not None:
            probe = HttpProbe(node=node, port=port, path=spec.http.path, status=spec.http.status)
        else:
            probe = TcpProbe(node=node, port=port)
    return Liveness(probe=probe, **spec.timings())


def service_ports(eff: EffectiveService, offset: int) -> dict[str, int]:
    """Every port one instance listens on: the kind's, plus the port its readiness names."""
    ports = eff.kind.ports(eff.config, offset)
    spec = eff.config.readiness
    if spec is not None:
        port = spec.port or (spec.tcp.port if spec.tcp else None) or (spec.http.port if spec.http else None)
        if port is not None and port not in ports.values():
            ports["readiness"] = port
    return ports


def _source_dir(ctx: PlanContext, eff: EffectiveService, *, in_step: bool) -> str:
    src = ctx.job_file(Place.SERVICE_STATE, posixpath.join(eff.name, "src"), in_step=in_step)
    source = eff.config.source
    return posixpath.join(src, source.path) if source and source.path else src


def service_units(ctx: PlanContext, eff: EffectiveService, container_of: dict[str, str | None]) -> list[Unit]:
    """Every unit of one service: clone and build first when it has a source, then its instances."""
    svc = eff.config
    insts = instances(ctx, eff)
    if not insts:
        ctx.warn(f"service {eff.name!r}: placement {eff.placement!r} matches no node; left out")
        return []
    image = container_of.get(eff.name)
    units: list[Unit] = []
    source_edge: tuple[Edge, ...] = ()
    if svc.source is not None:
        units.extend(_source_units(ctx, eff, insts[0].node, image))
        source_edge = (Edge(unit=units[-1].name, condition=Condition.SUCCEEDED),)
    pool = ctx.nodes.pools.get(eff.pool, ()) if eff.pool else tuple(i.node for i in insts)
    units.extend(_instance_unit(ctx, eff, inst, pool, image, source_edge) for inst in insts)
    return units


def _instance_env(ctx: PlanContext, eff: EffectiveService, inst: Instance, values: dict[str, object]) -> dict[str, str]:
    """One instance's own variables: discovery, the kind's defaults, the recipe's, the kind's forced ones."""
    svc, kind = eff.config, eff.kind
    env: dict[str, str] = {}
    if svc.inherit_discovery_env and kind.inherits_discovery:
        env.update({k: v for k, v in ctx.discovery.items() if k in ("ETCD_ENDPOINTS", "NATS_SERVER")})
    env.update(kind.default_env(ctx, svc, inst))
    env.update({k: render(v, values) for k, v in svc.env.items()})
    env.update(kind.forced_env(ctx, svc, inst))
    if inst.worker is not None and inst.worker.endpoint.partial:
        env[ctx.cluster.visible_devices_env] = inst.worker.visible_devices
    return env


def _instance_preamble(
    ctx: PlanContext, eff: EffectiveService, inst: Instance, values: dict[str, object]
) -> str | None:
    """The cluster's bash preamble, the source checkout, the kind's preamble, the recipe's."""
    svc, kind = eff.config, eff.kind
    parts = [ctx.cluster.default_bash_preamble if kind.shell else None]
    if svc.source is not None:
        parts.append(f"cd {_quote(_source_dir(ctx, eff, in_step=True))}")
    kind_preamble = kind.preamble(ctx, svc, inst)
    parts.append(render(kind_preamble, values) if kind_preamble else None)
    parts.append(render(svc.preamble, values) if svc.preamble else None)
    return "\n".join(p for p in parts if p) or None


def _instance_unit(
    ctx: PlanContext,
    eff: EffectiveService,
    inst: Instance,
    pool: tuple[str, ...],
    image: str | None,
    source_edge: tuple[Edge, ...],
) -> Unit:
    """The unit of one instance of a service."""
    svc, kind = eff.config, eff.kind
    values = placeholder_values(ctx, inst, pool, eff.placement)
    argv = [render(a, values) for a in (*kind.command(ctx, svc, inst), *svc.args)]
    env = _instance_env(ctx, eff, inst, values)
    preamble = _instance_preamble(ctx, eff, inst, values)
    readiness = readiness_of(svc.readiness, inst.node, ctx.log_dir) if svc.readiness else kind.readiness(ctx, svc, inst)
    if not argv:
        path = f"{eff.path}.command" if eff.position is not None else ""
        raise PlanError(Problem(f"service {eff.name!r} has no command", path=path))
    partial = inst.worker is not None and inst.worker.endpoint.partial
    return Unit(
        name=inst.unit_name,
        kind=UnitKind.SERVICE,
        phase="workers" if eff.start == "with_workers" else eff.start,
        nodes=(inst.node,),
        gpus=inst.worker.gpus if inst.worker is not None and partial else (),
        argv=tuple(argv),
        preamble=preamble,
        env={**ctx.job_env(), **env},
        container=None if kind.host_native and not svc.container else ctx.container(image),
        srun=Srun(
            cpus_per_task=svc.cpus_per_task,
            cpu_bind=svc.cpu_bind,
            options={
                **ctx.cluster.default_srun_options,
                **kind.srun_options(ctx, svc),
                **ctx.recipe.srun_options,
                **svc.srun_options,
            },
            shell=kind.shell,
            export_env=env if not kind.shell else {},
        ),
        log=ctx.log(kind.log_name(inst), kind.log_place),
        ports=service_ports(eff, ctx.port_offset),
        after=source_edge,
        readiness=readiness,
        liveness=liveness_of(
            svc.liveness, readiness, inst.node, eff.name, f"{eff.path}.liveness" if eff.position is not None else ""
        ),
        critical=eff.critical,
        terminal=svc.terminal,
        tier=eff.tier,
        terminate_timeout=kind.stop_timeout(ctx, svc),
        group=None,
        role=eff.placement,
        index=inst.index,
        implied_by=eff.implied_by,
        cwd=None,
    )


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _source_units(ctx: PlanContext, eff: EffectiveService, node: str, image: str | None) -> list[Unit]:
    svc = eff.config
    assert svc.source is not None
    clone = Unit(
        name=f"service_{eff.name}.clone",
        kind=UnitKind.BUILD,
        phase="workers" if eff.start == "with_workers" else eff.start,
        nodes=(node,),
        argv=(
            "bash",
            "-c",
            _CLONE_SCRIPT,
            "srtd-clone",
            svc.source.git,
            ctx.job_file(Place.SERVICE_STATE, posixpath.join(eff.name, "src"), in_step=False),
            svc.source.sha or svc.source.rev,
        ),
        log=ctx.log(f"service_{eff.name}.clone", Place.SERVICE),
        run_timeout=CLONE_TIMEOUT_SECONDS,
        critical=True,
        tier=eff.tier,
        terminate_timeout=10.0,
    )
    if not svc.build_command:
        ctx.warn(f"service {eff.name!r} has a source but no build_command; it runs from the clone as is")
        return [clone]
    build = Unit(
        name=f"service_{eff.name}.build",
        kind=UnitKind.BUILD,
        phase="workers" if eff.start == "with_workers" else eff.start,
        nodes=(node,),
        argv=tuple(svc.build_command),
        cwd=_source_dir(ctx, eff, in_step=True),
        env=ctx.job_env(),
        container=ctx.container(image),
        log=ctx.log(f"service_{eff.name}.build", Place.SERVICE),
        after=(Edge(unit=clone.name, condition=Condition.SUCCEEDED),),
        run_timeout=float(svc.build_timeout_seconds),
        critical=True,
        tier=eff.tier,
        terminate_timeout=10.0,
    )
    return [clone, build]
