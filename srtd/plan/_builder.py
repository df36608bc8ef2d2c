"""`build_plan`: recipe + cluster settings + nodes -> Plan.  Pure and deterministic."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace

from srtd._registry import unknown_name
from srtd._value import value_class
from srtd.benchmarks import BenchmarkTarget, benchmark_problems, benchmark_row, benchmark_unit
from srtd.cluster import Cluster
from srtd.context import PlanContext
from srtd.engines import DIRECT_LAUNCH, Engine, WorkerMode, engine_row, observed_frontends, observed_workers
from srtd.errors import PlanError, Problem, RecipeError
from srtd.frontends import Frontend, frontend_names, get_frontend
from srtd.layout import Place
from srtd.plan._checks import check_after, check_unique_names, cycle_problem, port_problems
from srtd.plan._clock import clock_units
from srtd.plan._graph import PHASES, start_order, with_explicit_edges, with_phase_edges
from srtd.plan._hosts import host_units, phases_with_hosts, with_host_steps
from srtd.plan._postprocess import postprocess_units
from srtd.plan._reporting import JobShape, publishers, status_reporting, without_token
from srtd.plan._spares import no_kill, spare_count
from srtd.recipe import MAX_JOB_NODES, LoadedRecipe, Recipe, ServiceConfig
from srtd.services import (
    EffectiveService,
    effective_services,
    get_kind,
    instances,
    kind_names,
    service_problems,
    service_units,
)
from srtd.topology import (
    ROLE_ORDER,
    Cursor,
    NodeMap,
    NodeNeeds,
    PortAllocator,
    carve,
    place_role,
    processes_of,
)
from srtd.unit import Condition, Edge, Plan, Sbatch, ShapeError, TeardownBudget, Unit

DEFAULT_TIME_LIMIT = "01:00:00"
EARLY_WARNING_MARGIN = 60  # Slurm may deliver the signal up to 60 s early


def check_recipe(loaded: LoadedRecipe) -> list[Problem]:
    """The rules that need the registries (kinds, frontends, engines), located in the file."""
    recipe = loaded.recipe
    found: list[tuple[str, str]] = list(service_problems(recipe))
    found += benchmark_problems(recipe.benchmark.type)
    frontend = get_frontend(recipe.frontend.type)
    if frontend is None:
        found.append(("frontend.type", unknown_name("frontend", recipe.frontend.type, frontend_names())))
    else:
        found += frontend.validate(recipe)
    for role in recipe.roles:
        cfg = recipe.engine_for(role)
        if cfg is not None:
            found += engine_row(cfg).validate(recipe, cfg, role)
    return [loaded.problem(message, path) for path, message in found]


def _with_gpn_origin(problem: Problem, ctx: PlanContext) -> Problem:
    """A fit problem says where the GPUs per node came from when the cluster settings gave them."""
    origin = ctx.cluster.origin("gpus_per_node")
    if "gpus_per_node" in ctx.recipe.resources.model_fields_set or origin is None:
        return problem
    return replace(problem, message=f"{problem.message} (gpus_per_node {ctx.gpus_per_node} is set at {origin})")


def gpus_per_node(recipe: Recipe, cluster: Cluster) -> int:
    if "gpus_per_node" in recipe.resources.model_fields_set:
        return recipe.resources.gpus_per_node
    return recipe.resources.gpus_per_node if cluster.gpus_per_node is None else cluster.gpus_per_node


def role_shape(recipe: Recipe, role: str, gpn: int) -> tuple[int, int, int]:
    """(workers, gpus per worker, nodes owned) of a role, with srt-slurm's defaults."""
    cfg = recipe.roles[role]
    workers = cfg.workers or 1
    if cfg.colocated:
        return workers, cfg.gpus or gpn, 0
    if isinstance(cfg.nodes, int):
        gpus = cfg.gpus or max(cfg.nodes * gpn // workers, 1)
        return workers, gpus, cfg.nodes
    gpus = cfg.gpus or gpn
    if gpus >= gpn or recipe.resources.spread_workers:
        return workers, gpus, workers * math.ceil(gpus / gpn)
    return workers, gpus, math.ceil(workers * gpus / gpn)


def _needs(recipe: Recipe, services: list[EffectiveService], frontend: Frontend, gpn: int) -> NodeNeeds:
    roles = {r: role_shape(recipe, r, gpn)[2] for r in ROLE_ORDER if r in recipe.roles}
    pools = tuple((s.name, s.config.nodes) for s in services if s.config.nodes and s.external is None)
    dedicated: set[str] = set()
    if any(s.placement == "dedicated" and s.external is None for s in services):
        dedicated.add("infra")
    if recipe.frontend.placement.node == "dedicated" and not frontend.direct:
        dedicated.add("frontend")
    if recipe.benchmark.placement.node == "dedicated" and benchmark_row(recipe.benchmark.type).runs:
        dedicated.add("client")
    needs = NodeNeeds(
        roles=roles,
        pools=pools,
        dedicated=frozenset(dedicated),
        colocate_dedicated=recipe.benchmark.colocate_with_frontend,
        colocated_decode="decode" in recipe.roles and recipe.roles["decode"].colocated,
    )
    if needs.total > MAX_JOB_NODES:  # before any node is named: 10**12 of them fill the memory
        biggest = max(roles, key=lambda role: roles[role], default=None)
        message = f"the recipe needs {needs.total} nodes ({needs.breakdown()}), more than {MAX_JOB_NODES}"
        raise PlanError(Problem(message, path=f"roles.{biggest}" if biggest else "services"))
    return needs


def _log_dir(recipe: Recipe, cluster: Cluster, job_id: str, given: str | None) -> str:
    if given:
        return given
    if recipe.output.log_dir:
        text = recipe.output.log_dir.replace("{job_id}", job_id).replace("{name}", recipe.name)
        return os.path.expandvars(text)
    return f"{cluster.output_root}/{job_id}/logs"


def build_plan(
    source: LoadedRecipe | Recipe,
    cluster: Cluster | None = None,
    *,
    nodes: Sequence[str] | None = None,
    job_id: str = "local",
    local: bool = False,
    log_dir: str | None = None,
    addresses: dict[str, str] | None = None,
    shared_ports: bool = False,
    port_offset: int = 0,
) -> Plan:
    """Every unit of the job, offline.  Same inputs, same plan, same JSON bytes.

    `port_offset` moves every port srtd chooses by that much (two jobs on one host).
    """
    cluster = cluster or Cluster()
    if port_offset < 0:
        raise PlanError(f"the port offset must be 0 or more, got {port_offset}")
    loaded = source if isinstance(source, LoadedRecipe) else None
    recipe = source.recipe if isinstance(source, LoadedRecipe) else source
    if loaded is not None:
        problems = check_recipe(loaded)
        if problems:
            raise RecipeError(problems)
    frontend = get_frontend(recipe.frontend.type)
    if frontend is None:
        raise PlanError(f"unknown frontend {recipe.frontend.type!r}")
    rows = _engine_rows(recipe)
    services = effective_services(recipe, [frontend, *dict.fromkeys(rows.values())], local=local)
    gpn = gpus_per_node(recipe, cluster)
    one_port_space = local or shared_ports or cluster.shared_port_space
    ctx = PlanContext(
        recipe=recipe,
        cluster=cluster,
        job_id=job_id,
        local=local,
        log_dir=_log_dir(recipe, cluster, job_id, log_dir),
        nodes=carve(_needs(recipe, services, frontend, gpn), nodes, 0 if local else spare_count(recipe, cluster)),
        gpus_per_node=gpn,
        addresses=dict(addresses or {}),
        shared_ports=one_port_space,
        ports=PortAllocator(
            local=one_port_space, bases={"sidecar_grpc": recipe.dynamo.sidecar_port}, offset=port_offset
        ),
        port_offset=port_offset,
    )
    units, bench = _checked_units(ctx, frontend, rows, services)
    return _assemble(ctx, loaded, units, bench)


def _engine_rows(recipe: Recipe) -> dict[str, Engine]:
    """The engine row of each role that runs an engine."""
    rows: dict[str, Engine] = {}
    for role in recipe.roles:
        cfg = recipe.engine_for(role)
        if cfg is not None:
            rows[role] = engine_row(cfg)
    return rows


def _worker_mode(ctx: PlanContext, frontend: Frontend) -> WorkerMode:
    """How the frontend wants its workers launched, its public port moved by the port offset."""
    recipe = ctx.recipe
    mode = frontend.mode(recipe) if frontend.worker_launch is not None or frontend.direct else None
    mode = mode or WorkerMode(DIRECT_LAUNCH, recipe.disaggregated)
    if mode.public_port is not None:
        mode = replace(mode, public_port=ctx.port(mode.public_port))
    return mode


def _checked_units(
    ctx: PlanContext, frontend: Frontend, rows: dict[str, Engine], services: list[EffectiveService]
) -> tuple[list[Unit], _Ends]:
    """Every unit with its edges, in start order, once the graph and the ports are checked."""
    mode = _worker_mode(ctx, frontend)
    _place_workers(ctx, rows, mode)
    kept = _skip_unrunnable(ctx, services)
    check_after(ctx.recipe, kept, services)
    _discovery(ctx, kept)
    units, bench = _units(ctx, frontend, rows, kept, mode)
    units = _with_cluster_mpi(ctx.cluster, units)
    check_unique_names(units, kept)
    units = with_phase_edges(units)
    units = with_explicit_edges(units, _service_edges(kept), {s.name for s in kept})
    # A cycle and a port clash are independent mistakes: report both at once.
    problems = [*cycle_problem(units, kept), *port_problems(ctx, units, kept)]
    if problems:
        raise PlanError(problems)
    setup, teardown = host_units(ctx, max((u.tier for u in units), default=0))
    setup += clock_units(ctx)
    # the log upload is the very last tier: after the host teardown steps too
    teardown += postprocess_units(ctx, max((u.tier for u in [*units, *teardown]), default=0))
    return start_order(with_host_steps(units, setup, teardown)), bench


def _assemble(ctx: PlanContext, loaded: LoadedRecipe | None, units: list[Unit], bench: _Ends) -> Plan:
    """The plan: the units, the teardown budget, the sbatch header, the reporting settings."""
    recipe, cluster, nodemap, gpn = ctx.recipe, ctx.cluster, ctx.nodes, ctx.gpus_per_node
    teardown = _teardown(cluster, units, ctx.local)
    if not teardown.fits and not ctx.local:
        ctx.warn(
            f"teardown needs up to {teardown.total_seconds:g} s but the early warning gives "
            f"{teardown.early_warning_seconds} s; raise early_warning_seconds in the cluster settings"
        )
    hold = bench.unit is None and not any(u.terminal for u in units)
    shape = JobShape(nodemap.head, ctx.log_dir, gpn, {r: role_shape(recipe, r, gpn) for r in recipe.roles})
    reporting = status_reporting(recipe, cluster, shape, ctx.warn)
    plan = Plan(
        name=recipe.name,
        recipe=loaded.file if loaded else None,
        variant=loaded.variant if loaded else None,
        job_id=ctx.job_id,
        local=ctx.local,
        log_dir=ctx.log_dir,
        nodes=nodemap.as_dict(),
        allocation=nodemap.allocation,
        addresses={n: ctx.address(n) for n in nodemap.allocation},
        phases=phases_with_hosts(PHASES, units),
        units=tuple(without_token(units, reporting)),
        gate=bench.gate,
        hold=hold,
        teardown=teardown,
        sbatch=None if ctx.local else _sbatch(recipe, cluster, nodemap, gpn, teardown),
        files=dict(sorted(ctx.files.items())),
        warnings=tuple(ctx.warnings),
        reporting=reporting,
        port_offset=ctx.port_offset,
        publishers=publishers(recipe, lambda stem: ctx.log(stem, Place.JOB)),
        power=ctx.power,
        spares=nodemap.spares,
        preflight=recipe.preflight.enabled,
    )
    if escaping := plan.outside_log_dir():  # names are checked at load; this is the proof
        raise PlanError(escaping)
    try:
        # checked once as a whole, as `srtd run PLAN.json` checks it: no copy on the way is
        return plan.checked()
    except ShapeError as e:  # a value that no recipe check refused: named here, never run
        raise PlanError(f"the plan would not load back: {e}") from None


def _with_cluster_mpi(cluster: Cluster, units: list[Unit]) -> list[Unit]:
    """The cluster's MPI plugin replaces the one a row asks for (a cluster may have no PMIx)."""
    if cluster.srun_mpi is None:
        return units
    return [replace(u, srun=replace(u.srun, mpi=cluster.srun_mpi)) if u.srun.mpi else u for u in units]


@value_class
class _Ends:
    gate: str | None
    unit: Unit | None  # the benchmark


def _units(
    ctx: PlanContext, frontend: Frontend, rows: dict[str, Engine], services: list[EffectiveService], mode: WorkerMode
) -> tuple[list[Unit], _Ends]:
    """Every unit, phase by phase, before edges: services, workers, frontend, services, benchmark."""
    units: list[Unit] = []
    containers = _service_images(ctx.recipe, services)
    for phase in ("infra", "before_workers"):
        units += [
            u
            for eff in services
            if eff.start == phase and eff.external is None
            for u in service_units(ctx, eff, containers)
        ]
    workers: list[Unit] = []
    for role in ROLE_ORDER:
        cfg = ctx.recipe.engine_for(role) if role in ctx.recipe.roles else None
        if cfg is None:
            continue
        for endpoint in ctx.endpoints.get(role, []):
            workers += rows[role].units(ctx, cfg, role, endpoint, mode)
    fplan = frontend.plan(ctx, workers)
    if fplan.gate_readiness is not None:
        # A direct frontend's gate is its one worker: probe it the frontend's way.
        workers = [replace(w, readiness=fplan.gate_readiness) if w.name == fplan.gate else w for w in workers]
    # nsys wrappers and observability's environment: the rows' own units, rewritten by one rule
    workers = observed_workers(ctx, workers, {r: row.nsys_env for r, row in rows.items()}, dynamo=mode.via_dynamo)
    front = observed_frontends(ctx, fplan.units, fplan.processes, dynamo=mode.via_dynamo)
    units += workers
    units += [
        u
        for eff in services
        if eff.start == "with_workers" and eff.external is None
        for u in service_units(ctx, eff, containers)
    ]
    units += front
    units += [
        u
        for eff in services
        if eff.start == "after_frontend" and eff.external is None
        for u in service_units(ctx, eff, containers)
    ]
    service_nodes = {
        eff.name: tuple(dict.fromkeys(i.node for i in instances(ctx, eff))) for eff in services if eff.external is None
    }
    target = BenchmarkTarget(fplan.node, fplan.port)
    bench = benchmark_unit(ctx, target, _bench_node(ctx), workers, service_nodes)
    if bench is not None:
        # The benchmark needs the gate itself, not only what came after it.
        gate = (Edge(unit=fplan.gate, condition=Condition.READY),) if fplan.gate else ()
        # what running services tell the client (a GPU exporter: the measurement window dir)
        told = {
            k: v for eff in services if eff.external is None for k, v in eff.kind.client_env(ctx, eff.config).items()
        }
        env = {**bench.env, **{k: v for k, v in told.items() if k not in bench.env}}  # the recipe's own wins
        bench = replace(bench, after=gate, env=env)
        units.append(bench)
    return units, _Ends(fplan.gate, bench)


def _service_edges(services: list[EffectiveService]) -> dict[str, tuple[str, ...]]:
    """`after:` of each service, plus what its kind waits for (a store waits for its master)."""
    wanted: dict[str, tuple[str, ...]] = {}
    for eff in services:
        implied = tuple(o.name for o in services if o.kind.name in eff.kind.waits_for and o.external is None)
        targets = tuple(dict.fromkeys((*eff.config.after, *implied)))
        if targets and eff.external is None:
            wanted[eff.name] = targets
    return wanted


def _place_workers(ctx: PlanContext, rows: dict[str, Engine], mode: WorkerMode) -> None:
    recipe = ctx.recipe
    cursor: Cursor | None = None
    for role in ROLE_ORDER:
        if role not in rows:
            continue
        workers, gpus, _ = role_shape(recipe, role, ctx.gpus_per_node)
        colocated = role == "decode" and recipe.roles[role].colocated
        nodes = ctx.nodes.roles[role]
        start = cursor if colocated else None
        try:
            endpoints, end = place_role(
                role, workers, gpus, nodes, ctx.gpus_per_node, spread=recipe.resources.spread_workers, cursor=start
            )
        except PlanError as err:
            raise PlanError([_with_gpn_origin(p, ctx) for p in err.problems]) from None
        if role == "prefill":
            cursor = end
        ctx.endpoints[role] = endpoints
        plan = rows[role].port_plan(recipe, role, mode)
        ctx.processes[role] = [p for e in endpoints for p in processes_of(e, plan, ctx.ports)]


def _skip_unrunnable(ctx: PlanContext, services: list[EffectiveService]) -> list[EffectiveService]:
    kept = []
    for eff in services:
        reason = eff.kind.skip_reason(ctx, eff.config)
        if reason is not None:
            ctx.warn(f"service {eff.name!r} is left out: {reason}")
            continue
        kept.append(eff)
    return kept


def _discovery(ctx: PlanContext, services: list[EffectiveService]) -> None:
    """Where the discovery plane is: the job's own services, or the external ones named."""
    for eff in services:
        if eff.external is None:
            on_nodes = ctx.node_services.setdefault(eff.kind.name, {})
            for inst in instances(ctx, eff):
                on_nodes.setdefault(inst.node, eff.kind.ports(eff.config, ctx.port_offset))
        var = eff.kind.discovery_var
        if var is None:
            continue
        if eff.external is not None:
            ctx.discovery[var] = eff.external
            continue
        insts = instances(ctx, eff)
        if not insts:
            continue
        address = ctx.address(insts[0].node)
        value = eff.kind.discovery_value(address, eff.config, ctx.port_offset)
        if value is not None:
            ctx.discovery[var] = value
        if eff.kind.kv_master and value is None:  # TRT-LLM's pool master: members read its address file
            ctx.mooncake_pool = dict(eff.config.options)
        elif eff.kind.kv_master:
            port = eff.kind.ports(eff.config, ctx.port_offset).get("metadata", ctx.port(8701))
            ctx.discovery["MOONCAKE_METADATA"] = f"http://{address}:{port}/metadata"
            store = eff.config.options.get("store_config")
            ctx.mooncake_store = dict(store) if isinstance(store, dict) else {}
    _advertise_absent_planes(ctx)


def _advertise_absent_planes(ctx: PlanContext) -> None:
    """srtctl points every process at an etcd on the infra node even when the job runs none.

    Except where the recipe switched the plane off: then nothing points at it.
    """
    switched_off = {s.type for s in ctx.recipe.services if not s.enabled}
    for name in kind_names():
        kind = get_kind(name)
        if kind is None or name in switched_off or not kind.advertised_without_service:
            continue
        if kind.discovery_var and kind.discovery_var not in ctx.discovery:
            value = kind.discovery_value(
                ctx.address(ctx.nodes.infra), ServiceConfig(name=name, type=name), ctx.port_offset
            )
            if value is not None:
                ctx.discovery[kind.discovery_var] = value


def _service_images(recipe: Recipe, services: list[EffectiveService]) -> dict[str, str | None]:
    """Each service's image: its own, its kind's fallback, the master's (stores), then the job's."""
    master = next((s for s in services if s.kind.kv_master), None)
    out: dict[str, str | None] = {}
    for eff in services:
        image = eff.config.container or eff.kind.container_fallback
        if image is None and eff.kind.borrows_master_image and master is not None:
            image = master.config.container
        out[eff.name] = image or recipe.model.container
    return out


def _bench_node(ctx: PlanContext) -> str:
    if ctx.recipe.benchmark.placement.node == "last_decode":
        decode = [p for p in ctx.processes.get("decode", []) if p.is_leader]
        if decode:
            return decode[-1].node
    return ctx.nodes.benchmark


def _teardown(cluster: Cluster, units: Sequence[Unit], local: bool) -> TeardownBudget:
    tiers: dict[str, float] = {}
    for unit in units:
        key = str(unit.tier)
        # a host teardown step is launched in its tier, not stopped: its budget is its run
        # timeout and the grace of the kill that ends it there
        need = (unit.run_timeout or 0.0) + unit.terminate_timeout if unit.on_teardown else unit.terminate_timeout
        tiers[key] = max(tiers.get(key, 0.0), need)
    tiers = dict(sorted(tiers.items()))
    total = sum(tiers.values())
    early = cluster.early_warning_seconds
    if early is None:
        early = math.ceil(total) + EARLY_WARNING_MARGIN
    return TeardownBudget(
        tiers=tiers,
        total_seconds=total,
        kill_wait_seconds=float(cluster.kill_wait_seconds),
        early_warning_seconds=0 if local else early,
        fits=local or total <= early,
    )


def _sbatch(recipe: Recipe, cluster: Cluster, nodemap: NodeMap, gpn: int, teardown: TeardownBudget) -> Sbatch:
    slurm = recipe.slurm
    count = len(nodemap.allocation) - len(nodemap.unused)
    return Sbatch(
        job_name=recipe.name,
        nodes=count,
        ntasks=count,
        ntasks_per_node=1,
        gpus_per_node=gpn if cluster.use_gpus_per_node_directive and recipe.roles else None,
        account=slurm.account or cluster.default_account,
        partition=slurm.partition or cluster.default_partition,
        time_limit=slurm.time_limit or cluster.default_time_limit or DEFAULT_TIME_LIMIT,
        signal=f"B:USR1@{teardown.early_warning_seconds}",
        directives={**no_kill(nodemap.spares), **cluster.default_sbatch_directives, **recipe.sbatch_directives},
    )
