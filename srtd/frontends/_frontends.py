"""The frontend rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from srtd.context import PlanContext
from srtd.engines import (
    DIRECT_LAUNCH,
    DYNAMO_LAUNCH,
    MORIIO_DISCOVERY_PORT,
    WorkerMode,
    dynamo_env,
    install_preamble,
    kv_connector,
    served_model_name,
    with_dynamo_install,
)
from srtd.errors import PlanError, Problem
from srtd.frontends._base import (
    Frontend,
    FrontendPlan,
    Layout,
    dynamo_gate,
    leaders,
    models_gate,
    register_frontend,
    router_gate,
    tcp_ready,
    worker_url,
)
from srtd.layout import Place
from srtd.recipe import NO_FRONTEND, Recipe
from srtd.topology import BOOTSTRAP, FRONTEND_PUBLIC_PORT, NIXL, ROUTER_METRICS_PORT, Process
from srtd.unit import HttpProbe, Readiness, Srun, Unit, UnitKind

METRICS_PORT = "{metrics_port}"  # in `metrics_flags`: the router's metrics port of this job
ORCHESTRATOR_CONFIG = "ser.yaml"  # trtllm-serve disaggregated's server config: srtctl's file name


def _nginx(ctx: PlanContext, layout: Layout, readiness: Readiness | None) -> Unit:
    """nginx on the head, spreading requests over the frontend replicas."""
    assert layout.nginx is not None
    fe = ctx.recipe.frontend
    upstreams = "\n".join(
        f"        server {ctx.address(n)}:{p} max_fails=0;" for n, p in zip(layout.nodes, layout.ports, strict=True)
    )
    balance = f"        hash $http_{fe.nginx_session_affinity_header.lower().replace('-', '_')} consistent;\n"
    conf = (
        "worker_processes auto;\n"
        + ("worker_rlimit_nofile 1048576;\n" if fe.nginx_raise_ulimit else "")
        + "events { worker_connections 65536; }\n"
        "http {\n"
        "    upstream frontends {\n"
        + (balance if fe.nginx_session_affinity else "        least_conn;\n")
        + f"{upstreams}\n        keepalive 1024;\n    }}\n"
        "    server {\n"
        f"        listen {layout.public_port};\n"
        f"        keepalive_timeout {fe.nginx_keepalive_timeout};\n"
        "        proxy_read_timeout 24h;\n        proxy_send_timeout 24h;\n"
        "        location / {\n"
        "            proxy_pass http://frontends;\n"
        "            proxy_http_version 1.1;\n"
        '            proxy_set_header Connection "";\n'
        "            proxy_buffering off;\n"
        "        }\n    }\n}\n"
    )
    ctx.files[ctx.job_file(Place.JOB, "nginx.conf", in_step=False)] = conf
    config = ctx.job_file(Place.JOB, "nginx.conf", in_step=True)
    return Unit(
        name="nginx",
        kind=UnitKind.FRONTEND,
        phase="frontend",
        nodes=(layout.nginx,),
        argv=("nginx", "-c", config, "-g", "daemon off;"),
        env=ctx.job_env(),
        container=ctx.container(fe.nginx_container, remap_root=True),
        srun=Srun(shell=False),  # the container's remap_root says --container-remap-root
        log=ctx.log(f"{layout.nginx}_nginx", Place.WORKER),
        ports={"http": layout.public_port},
        readiness=readiness,
        critical=True,
        tier=0,
        terminate_timeout=20.0,
    )


class _Replicated(Frontend):
    """A frontend process per replica, behind nginx when there are several."""

    def command(self, ctx: PlanContext, port: int) -> list[str]:
        raise NotImplementedError

    def env(self, ctx: PlanContext) -> dict[str, str]:
        return dict(ctx.recipe.environment.items())  # the recipe's job-wide variables reach every process

    def srun(self, ctx: PlanContext) -> Srun:
        return Srun()

    def gate_probe(self, ctx: PlanContext, node: str, port: int) -> Any:
        raise NotImplementedError

    def plan(self, ctx: PlanContext, workers: Sequence[Unit]) -> FrontendPlan:
        layout = self.layout(ctx)
        public_node = layout.nginx or layout.nodes[0]
        gate = self.gate_readiness(ctx, self.gate_probe(ctx, public_node, layout.public_port))
        units = []
        for i, (node, port) in enumerate(zip(layout.nodes, layout.ports, strict=True)):
            ready = gate if layout.nginx is None else tcp_ready(node, port)
            units.append(
                self.unit(
                    ctx,
                    f"frontend_{i}",
                    node,
                    self.command(ctx, port),
                    env=self.env(ctx),
                    ports={"http": port},
                    readiness=ready,
                    srun=self.srun(ctx),
                    log=f"{node}_{self.log_stem}_{i}",
                )
            )
        servers = tuple(u.name for u in units)
        if layout.nginx is not None:
            units.append(_nginx(ctx, layout, gate))
        return FrontendPlan(tuple(units), units[-1].name, public_node, layout.public_port, processes=servers)


@register_frontend("dynamo")
class Dynamo(_Replicated):
    description = "the Dynamo frontend; workers register through etcd"
    worker_launch = DYNAMO_LAUNCH

    def implied_services(self, recipe: Recipe) -> list[tuple[dict[str, Any], str]]:
        out: list[tuple[dict[str, Any], str]] = [({"name": "etcd", "type": "etcd"}, "frontend.type: dynamo")]
        planes = recipe.dynamo
        if "nats" in (planes.request_plane, planes.event_plane):
            out.append(({"name": "nats", "type": "nats"}, "dynamo.request_plane / event_plane: nats"))
        return out

    def command(self, ctx: PlanContext, port: int) -> list[str]:
        argv = ["python3", "-m", "dynamo.frontend", f"--http-port={port}"]
        if ctx.local:
            argv += ["--http-host", "127.0.0.1"]
        return argv + self.args(ctx)

    def env(self, ctx: PlanContext) -> dict[str, str]:
        return {**dynamo_env(ctx), **dict(ctx.recipe.environment.items())}

    def srun(self, ctx: PlanContext) -> Srun:
        return with_dynamo_install(ctx, Srun(mpi="pmix"))

    def preamble(self, ctx: PlanContext) -> str | None:
        parts = (ctx.cluster.default_bash_preamble, install_preamble(ctx))
        return "\n".join(p for p in parts if p) or None

    def gate_probe(self, ctx: PlanContext, node: str, port: int) -> Any:
        return dynamo_gate(ctx, node, port, self.expectations(ctx))


class _StaticRouter(_Replicated):
    """Routers that take worker URLs on their command line and count them on /workers."""

    executable: ClassVar[tuple[str, ...]] = ()
    pd_flag: ClassVar[str] = "--pd-disaggregation"
    worker_flag: ClassVar[str] = "--worker-urls"
    url_scheme: ClassVar[str] = "http"
    metrics_flags: ClassVar[tuple[str, ...]] = ()  # where the router serves Prometheus metrics

    def bind(self, ctx: PlanContext) -> str:
        return "127.0.0.1" if ctx.local else "0.0.0.0"

    def command(self, ctx: PlanContext, port: int) -> list[str]:
        argv = [*self.executable, "--host", self.bind(ctx), "--port", str(port)]
        if ctx.recipe.disaggregated:
            argv += [self.pd_flag, *self.pd_workers(ctx)]
        else:
            urls = [self.url(ctx, p) for p in leaders(ctx, "agg")]
            if urls:
                argv += [self.worker_flag, *urls]
        metrics = str(ctx.port(ROUTER_METRICS_PORT))
        flags = [metrics if flag == METRICS_PORT else flag for flag in self.metrics_flags]
        return argv + flags + self.own_flags(ctx) + self.args(ctx)

    def url(self, ctx: PlanContext, proc: Process) -> str:
        return worker_url(ctx, proc).replace("http://", f"{self.url_scheme}://", 1)

    def pd_workers(self, ctx: PlanContext) -> list[str]:
        """`--prefill URL [PORT]` per prefill worker, `--decode URL` per decode worker."""
        argv: list[str] = []
        for proc in leaders(ctx, "prefill"):
            argv += ["--prefill", self.url(ctx, proc)]
            extra = self.prefill_port(proc)
            if extra is not None:
                argv.append(str(extra))
        for proc in leaders(ctx, "decode"):
            argv += ["--decode", self.url(ctx, proc)]
        return argv

    def own_flags(self, ctx: PlanContext) -> list[str]:
        """Flags this router always takes, before the recipe's `frontend.args`."""
        return []

    def gate_probe(self, ctx: PlanContext, node: str, port: int) -> Any:
        return router_gate(node, port, self.expectations(ctx))

    def prefill_port(self, proc: Process) -> int | None:
        """The port advertised next to a prefill URL: SGLang's bootstrap port."""
        return proc.ports.get(BOOTSTRAP.name)


@register_frontend("sglang-router")
class SGLangRouter(_StaticRouter):
    description = "the SGLang model gateway in front of SGLang servers"
    log_stem = "router"  # srtctl's log name: <node>_router_<i>.out
    engines = frozenset({"sglang"})
    executable = ("python3", "-m", "sglang_router.launch_router")
    metrics_flags = ("--prometheus-port", METRICS_PORT, "--prometheus-host", "0.0.0.0")


@register_frontend("sgl-router")
class SglRouter(_StaticRouter):
    description = "the standalone sgl-router binary; command line not verified on hardware"
    engines = frozenset({"sglang"})
    executable = ("/usr/local/bin/sgl-router",)  # where srtctl runs it from, the router image's own binary

    def command(self, ctx: PlanContext, port: int) -> list[str]:
        # srtctl gives the standalone router every worker, prefill and decode alike, as --worker-urls
        # (no --pd-disaggregation), and names the model the workers serve
        urls = [self.url(ctx, p) for role in ("prefill", "decode", "agg") for p in leaders(ctx, role)]
        argv = [*self.executable, "--host", self.bind(ctx), "--port", str(port)]
        if urls:
            argv += ["--worker-urls", *urls]
        if "model-id" not in (ctx.recipe.frontend.args or {}):
            argv += ["--model-id", served_model_name(ctx.recipe, None, ctx.model_host_path)]
        return argv + self.args(ctx)

    def srun(self, ctx: PlanContext) -> Srun:
        return Srun(shell=False)  # a bare binary, as srtctl starts it: the router image need not have bash


@register_frontend("smg")
class SGLangModelGateway(_StaticRouter):
    description = "the SGLang model gateway binary (`smg`); command line not verified on hardware"
    log_stem = "smg"  # srtctl's log name: <node>_smg_<i>.out
    engines = frozenset({"sglang", "vllm", "tokenspeed"})
    executable = ("smg", "launch")
    metrics_flags = ("--prometheus-port", METRICS_PORT)


@register_frontend("vllm-router")
class VLLMRouter(_StaticRouter):
    description = "the vLLM router in front of vLLM servers; command line not verified on hardware"
    log_stem = "vllm-router"  # srtctl's log name: <node>_vllm-router_<i>.out
    engines = frozenset({"vllm"})
    executable = ("vllm-router",)
    pd_flag = "--vllm-pd-disaggregation"

    def prefill_port(self, proc: Process) -> int | None:
        # KV moves over NIXL: the router hands decode the prefill's side-channel port
        return proc.ports.get(NIXL.name)

    def pd_workers(self, ctx: PlanContext) -> list[str]:
        if any(kv_connector(ctx.recipe, role) == "moriio" for role in ("prefill", "decode")):
            # MoRIIO workers announce themselves to the router's discovery listener
            return [
                "--kv-connector",
                "moriio",
                "--vllm-discovery-address",
                f"0.0.0.0:{ctx.port(MORIIO_DISCOVERY_PORT)}",
            ]
        return super().pd_workers(ctx)

    def own_flags(self, ctx: PlanContext) -> list[str]:
        # wait as long as srtd's own health gate before giving up on a worker
        check = ctx.recipe.health_check
        return ["--worker-startup-timeout-secs", str(check.max_attempts * check.interval_seconds)]


@register_frontend("atomesh")
class Atomesh(_StaticRouter):
    description = "the ATOM mesh router; command line not verified on hardware"
    log_stem = "atomesh"  # srtctl's log name: <node>_atomesh_<i>.out
    engines = frozenset({"atom"})
    executable = ("atomesh", "launch")

    def own_flags(self, ctx: PlanContext) -> list[str]:
        return ["--backend", "atom"]

    def prefill_port(self, proc: Process) -> int | None:
        return None  # ATOM's KV handshake goes through its kv-transfer-config, not the router


@register_frontend("tilert-router")
class TileRTRouter(_StaticRouter):
    description = "the TileRT router (vLLM prefill, TileRT decode); command line not verified on hardware"
    log_stem = "tilert-router"  # srtctl's log name: <node>_tilert-router_<i>.out
    engines = frozenset({"tilert", "vllm"})
    executable = ("python3", "-m", "tilert.pd_vllm.pd_router")

    def command(self, ctx: PlanContext, port: int) -> list[str]:
        argv = [*self.executable]
        for proc in leaders(ctx, "prefill"):
            argv += ["--vllm-url", worker_url(ctx, proc)]
        for proc in leaders(ctx, "decode"):
            # decode servers are addressed as host:control-port:http-port
            argv += ["--decode", f"{ctx.address(proc.node)}:{proc.ports[NIXL.name]}:{proc.ports['http']}"]
        return [*argv, "--host", self.bind(ctx), "--port", str(port), *self.args(ctx)]


@register_frontend("toy-router")
class ToyRouter(_StaticRouter):
    description = "srtd's toy router (`srtd-toy-router`), for demos without a GPU"
    engines = frozenset({"toy", "custom"})
    executable = ("srtd-toy-router",)

    def command(self, ctx: PlanContext, port: int) -> list[str]:
        argv = [*self.executable, "--host", self.bind(ctx), "--port", str(port)]
        for role, flag in (("prefill", "--prefill"), ("decode", "--decode"), ("agg", "--worker")):
            for proc in leaders(ctx, role):
                argv += [flag, worker_url(ctx, proc)]
        return argv + self.args(ctx)


class _Direct(Frontend):
    """The single aggregated worker binds the public port itself: no router process."""

    direct = True

    def validate(self, recipe: Recipe) -> list[tuple[str, str]]:
        problems = super().validate(recipe)
        if recipe.disaggregated or "agg" not in recipe.roles:
            problems.append(
                ("frontend.type", f"`{self.name}` serves one aggregated worker; use a router for prefill/decode")
            )
        elif (recipe.roles["agg"].workers or 1) != 1:
            problems.append(("roles.agg.workers", self._several(recipe.roles["agg"].workers or 1)))
        return problems

    def _several(self, count: int) -> str:
        return (
            f"frontend `{self.name}` has no router: its one worker binds port 8000, but roles.agg has "
            f"{count} workers; use a router frontend (sglang-router, vllm-router, dynamo) for several"
        )

    def mode(self, recipe: Recipe) -> WorkerMode:
        return WorkerMode(DIRECT_LAUNCH, False, public_port=8000)

    def gate_probe(self, node: str, port: int) -> Any:
        # a direct server answers /health before it serves; /v1/models lists the model once it does
        return models_gate(node, port)

    def plan(self, ctx: PlanContext, workers: Sequence[Unit]) -> FrontendPlan:
        count = len(ctx.endpoints.get("agg", []))
        if count != 1:
            raise PlanError(Problem(self._several(count), path="roles.agg.workers"))
        leader = next(u for u in workers if u.readiness is not None or u.ports.get("http"))
        public = ctx.port(FRONTEND_PUBLIC_PORT)
        gate = self.gate_readiness(ctx, self.gate_probe(leader.node, public))
        return FrontendPlan((), leader.name, leader.node, public, gate)


def _register_direct(engine: str, description: str) -> None:
    """A direct frontend is named after the one engine it fronts."""
    row = type(f"{engine.capitalize()}Direct", (_Direct,), {"description": description, "engines": frozenset({engine})})
    register_frontend(engine)(row)


_register_direct("sglang", "one SGLang server is the endpoint")
_register_direct("vllm", "one vLLM server is the endpoint")
_register_direct("atom", "one ATOM server is the endpoint; command line not verified on hardware")


@register_frontend("trtllm_serve")
class TRTLLMServe(Frontend):
    description = "trtllm-serve: one aggregated server, or a disaggregated orchestrator"
    engines = frozenset({"trtllm"})

    def mode(self, recipe: Recipe) -> WorkerMode:
        if recipe.disaggregated:
            return WorkerMode(DIRECT_LAUNCH, True)
        return WorkerMode(DIRECT_LAUNCH, False, public_port=8000)

    def plan(self, ctx: PlanContext, workers: Sequence[Unit]) -> FrontendPlan:
        if not ctx.recipe.disaggregated:
            leader = next(u for u in workers if u.readiness is not None)
            return FrontendPlan((), leader.name, leader.node, ctx.port(FRONTEND_PUBLIC_PORT))
        fe = ctx.recipe.frontend
        public = ctx.port(FRONTEND_PUBLIC_PORT)
        lines = ["hostname: 0.0.0.0", f"port: {public}", "backend: pytorch"]
        for role, section in (("prefill", "context_servers"), ("decode", "generation_servers")):
            urls = [f"{ctx.address(p.node)}:{p.ports['http']}" for p in leaders(ctx, role)]
            lines += [f"{section}:", f"  num_instances: {len(urls)}", "  urls:"]
            lines += [f"    - {u}" for u in urls]
        if fe.server_config_extra:
            lines += [f"{k}: {v}" for k, v in fe.server_config_extra.items()]
        ctx.files[ctx.job_file(Place.JOB, ORCHESTRATOR_CONFIG, in_step=False)] = "\n".join(lines) + "\n"
        node = self.home(ctx)
        argv = ["trtllm-serve", "disaggregated", "--config", ctx.job_file(Place.JOB, ORCHESTRATOR_CONFIG, in_step=True)]
        ready = self.gate_readiness(ctx, HttpProbe(node=node, port=public, path="/health"))
        unit = self.unit(
            ctx,
            "trtllm_serve_orchestrator",
            node,
            argv,
            ports={"http": public},
            readiness=ready,
            srun=Srun(mpi="pmix"),
            log=f"{node}_{self.log_stem}_0",  # srtctl's name: the job's one frontend
        )
        return FrontendPlan((unit,), unit.name, node, public, processes=(unit.name,))


@register_frontend(NO_FRONTEND)
class NoFrontend(Frontend):
    description = "no frontend: services-only jobs, or custom workers gated by their own health"
    worker_launch = None
    engines = frozenset({"custom"})

    def mode(self, recipe: Recipe) -> WorkerMode:
        return WorkerMode(DIRECT_LAUNCH, recipe.disaggregated)

    def plan(self, ctx: PlanContext, workers: Sequence[Unit]) -> FrontendPlan:
        return FrontendPlan((), None, None, None)
