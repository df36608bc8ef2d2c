"""What a frontend row is: its processes, where they run, and its readiness gate as data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from srtd._registry import Registry, Row
from srtd._value import value_class
from srtd.context import PlanContext
from srtd.engines import DIRECT_LAUNCH, DYNAMO_LAUNCH, WorkerLaunch, WorkerMode, engine_row, flags
from srtd.layout import Place
from srtd.recipe import Recipe
from srtd.topology import FRONTEND_INTERNAL_PORT, FRONTEND_PUBLIC_PORT, GRPC, HTTP, Process
from srtd.unit import Count, Readiness, Srun, TcpProbe, Unit, UnitKind, WorkerCountProbe


@value_class
class FrontendPlan:
    """The frontend's units, which of them carries the gate, and the public endpoint."""

    units: tuple[Unit, ...]
    gate: str | None  # unit name whose readiness is the frontend gate
    node: str | None  # public endpoint
    port: int | None
    gate_readiness: Readiness | None = None  # direct frontends: the probe their worker gets
    processes: tuple[str, ...] = ()  # the frontend's own server units (not nginx): what observability wraps


@value_class
class Layout:
    """Where the frontend processes go: one on the head, or several behind nginx."""

    nginx: str | None
    nodes: tuple[str, ...]
    ports: tuple[int, ...]
    public_port: int


class Frontend(Row):
    """One `frontend.type`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    worker_launch: ClassVar[WorkerLaunch | None] = DIRECT_LAUNCH
    direct: ClassVar[bool] = False  # the single aggregated worker is itself the frontend
    engines: ClassVar[frozenset[str] | None] = None  # engine types it can front; None: any
    terminate_timeout: ClassVar[float] = 20.0
    log_stem: ClassVar[str] = "frontend"  # its processes log to <node>_<log_stem>_<i>.out (srtctl's names)

    def implied_services(self, recipe: Recipe) -> list[tuple[dict[str, Any], str]]:
        return []

    def validate(self, recipe: Recipe) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        for role in recipe.roles:
            cfg = recipe.engine_for(role)
            if cfg is None:
                continue
            if self.engines is not None and cfg.type not in self.engines:
                known = ", ".join(sorted(self.engines))
                problems.append(
                    (
                        "frontend.type",
                        f"{self.name} fronts {known} workers, not {cfg.type} (roles.{role})",
                    )
                )
            elif self.worker_launch is not None and self.worker_launch not in engine_row(cfg).launches:
                problems.append(
                    (
                        "frontend.type",
                        f"{self.name} needs workers launched the {self.worker_launch} way, "
                        f"which the {cfg.type} engine does not do (roles.{role})",
                    )
                )
        return problems

    def mode(self, recipe: Recipe) -> WorkerMode:
        assert self.worker_launch is not None
        return WorkerMode(self.worker_launch, recipe.disaggregated)

    def plan(self, ctx: PlanContext, workers: Sequence[Unit]) -> FrontendPlan:
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def layout(self, ctx: PlanContext) -> Layout:
        fe = ctx.recipe.frontend
        head = self.home(ctx)
        total = fe.num_additional_frontends + 1 if fe.enable_multiple_frontends else 1
        public = ctx.port(FRONTEND_PUBLIC_PORT)
        if total == 1:
            return Layout(None, (head,), (public,), public)
        pool = [n for n in ctx.nodes.workers if n != head] or [head]
        nodes = tuple(pool[i % len(pool)] for i in range(total))
        per_node: dict[str, int] = {}
        ports = []
        for node in nodes:
            key = "" if ctx.local else node
            ports.append(ctx.port(FRONTEND_INTERNAL_PORT) + per_node.get(key, 0))
            per_node[key] = per_node.get(key, 0) + 1
        return Layout(head, nodes, tuple(ports), public)

    def home(self, ctx: PlanContext) -> str:
        """The node of the (first) frontend: head, or the first decode worker's leader."""
        if ctx.recipe.frontend.placement.node == "first_decode":
            decode = [p for p in ctx.processes.get("decode", []) if p.is_leader]
            if decode:
                return decode[0].node
        return ctx.nodes.head

    def expectations(self, ctx: PlanContext) -> tuple[int, int]:
        """(prefill, decode) registrations the gate waits for; aggregated workers count as decode."""
        counts = {"prefill": 0, "decode": 0}
        for role, endpoints in ctx.endpoints.items():
            cfg = ctx.recipe.engine_for(role)
            per = registrations(cfg) if self.worker_launch == DYNAMO_LAUNCH else 1
            counts["prefill" if role == "prefill" else "decode"] += len(endpoints) * per
        return counts["prefill"], counts["decode"]

    def gate_readiness(self, ctx: PlanContext, probe: Any) -> Readiness:
        check = ctx.recipe.health_check
        return Readiness(
            probe=probe,
            timeout_seconds=float(check.max_attempts * check.interval_seconds),
            interval_seconds=float(check.interval_seconds),
        )

    def unit(
        self,
        ctx: PlanContext,
        name: str,
        node: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        image: str | None = None,
        ports: dict[str, int] | None = None,
        readiness: Readiness | None = None,
        srun: Srun | None = None,
        log: str | None = None,
    ) -> Unit:
        fe = ctx.recipe.frontend
        merged = {**ctx.job_env(), **(env or {}), **(fe.env or {})}
        return Unit(
            name=name,
            kind=UnitKind.FRONTEND,
            phase="frontend",
            nodes=(node,),
            argv=tuple(argv),
            preamble=self.preamble(ctx),
            env=merged,
            container=ctx.container(image or fe.container_image or ctx.recipe.model.container),
            srun=srun or Srun(),
            log=ctx.log(log or f"{node}_{name}", Place.WORKER),
            ports=ports or {},
            readiness=readiness,
            critical=True,
            tier=0,
            terminate_timeout=self.terminate_timeout,
        )

    def args(self, ctx: PlanContext) -> list[str]:
        return flags(ctx.recipe.frontend.args or {})

    def preamble(self, ctx: PlanContext) -> str | None:
        return ctx.cluster.default_bash_preamble


def registrations(cfg: Any) -> int:
    """How many Dynamo registrations one worker of this engine makes (mocker: several per process)."""
    workers = getattr(cfg, "num_workers", 1) or 1
    dp = getattr(cfg, "data_parallel_size", 1) or 1
    return int(workers) * int(dp)


def worker_url(ctx: PlanContext, proc: Process) -> str:
    if HTTP.name not in proc.ports and GRPC.name in proc.ports:
        return f"grpc://{ctx.address(proc.node)}:{proc.ports[GRPC.name]}"  # a gRPC-only worker
    return f"http://{ctx.address(proc.node)}:{proc.ports[HTTP.name]}"


def leaders(ctx: PlanContext, role: str) -> list[Process]:
    return [p for p in ctx.processes.get(role, []) if p.is_leader]


def dynamo_gate(ctx: PlanContext, node: str, port: int, expect: tuple[int, int]) -> WorkerCountProbe:
    """Dynamo's /health lists one instance per registered worker endpoint."""
    return WorkerCountProbe(
        node=node,
        port=port,
        path="/health",
        prefill=(Count(items="instances", where={"endpoint": "generate", "component": "prefill"}),),
        decode=(
            Count(
                items="instances",
                where={"endpoint": "generate", "component": ["decode", "tensorrt_llm", "backend"]},
            ),
        ),
        expect_prefill=expect[0],
        expect_decode=expect[1],
    )


def router_gate(node: str, port: int, expect: tuple[int, int]) -> WorkerCountProbe:
    """SGLang-gateway-style routers: /workers stats count healthy workers by type."""
    return WorkerCountProbe(
        node=node,
        port=port,
        path="/workers",
        prefill=(Count(field="stats.prefill_count"),),
        decode=(Count(field="stats.decode_count"), Count(field="stats.regular_count")),
        expect_prefill=expect[0],
        expect_decode=expect[1],
    )


def models_gate(node: str, port: int) -> WorkerCountProbe:
    """A direct server is ready once /v1/models lists a model."""
    return WorkerCountProbe(node=node, port=port, path="/v1/models", decode=(Count(items="data"),), expect_decode=1)


def tcp_ready(node: str, port: int) -> Readiness:
    return Readiness(probe=TcpProbe(node=node, port=port), timeout_seconds=300.0)


FRONTENDS: Registry[Frontend] = Registry("frontend")
register_frontend = FRONTENDS.register
get_frontend = FRONTENDS.get
frontend_names = FRONTENDS.names
