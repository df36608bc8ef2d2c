"""The TensorRT-LLM row: one MPI step per endpoint, the role's args as a YAML config file."""

from __future__ import annotations

from typing import Any

from srtd.context import PlanContext
from srtd.engines._base import Engine, WorkerMode, disagg_mode, dynamo_worker_flags, need_port, register_engine
from srtd.engines._trtllm_pool import dynamo_entry, pool_env, pool_preamble
from srtd.layout import Place
from srtd.recipe import EngineConfig, Recipe, TRTLLMEngine
from srtd.topology import HTTP, KV_EVENTS, NIXL, SYS, TRTLLM_DIST_INIT, PortPlan, Process
from srtd.unit import Readiness, Srun, TcpProbe


def dump_yaml(data: dict[str, Any]) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    yaml.dump(_plain(data), out)
    return out.getvalue()


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# Any exit code but 0, spelled without lookahead: log patterns are RE2 (srtd/patterns.py).
TRTLLM_FATAL = (r"^Rank\d+ Task exit code: (?:[1-9]\d*|0\d+)$", r"Failed to initialize executor")


@register_engine(TRTLLMEngine)
class TRTLLM(Engine):
    health_path = "/health"  # trtllm-serve and the Dynamo system port
    launch_per_endpoint = True
    nsys_mpi = True
    nsys_env = {"TLLM_LLMAPI_ENABLE_NVTX": "1", "TLLM_PROFILE_LOG_RANKS": "all"}  # every rank's LLM-API ranges
    fatal_patterns = TRTLLM_FATAL
    owned_flags = frozenset({"port", "host", "model-path"})

    def port_plan(self, recipe: Recipe, role: str, mode: WorkerMode) -> PortPlan:
        return PortPlan(every=(SYS, KV_EVENTS, NIXL), leader=(HTTP, TRTLLM_DIST_INIT))

    def config_file(self, ctx: PlanContext, role: str, *, in_step: bool) -> str:
        return ctx.job_file(Place.JOB, f"trtllm_config_{role}.yaml", in_step=in_step)

    def argv(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> list[str]:
        served = self.served_model_name(ctx, role)
        config = self.config_file(ctx, role, in_step=True)
        args = ctx.recipe.roles[role].args
        # TRT-LLM reads a role's args from a YAML file, not from flags.
        ctx.files[self.config_file(ctx, role, in_step=False)] = dump_yaml(dict(args))
        # Every rank of the MPI step starts through the launcher, one GPU or many.
        argv = [*self.numa_wrapper(cfg), "trtllm-llmapi-launch"]
        if mode.via_dynamo:
            argv += [*dynamo_entry(ctx, role, config), "--model-path", ctx.model_path, "--served-model-name", served]
            argv += disagg_mode(role) if mode.disaggregated else []
            argv += ["--extra-engine-args", config, *dynamo_worker_flags(ctx, proc, dump_config=False)]
            if isinstance(cfg, TRTLLMEngine):
                if cfg.publish_events_and_metrics:
                    argv.append("--publish-events-and-metrics")
                elif cfg.publish_metrics:
                    argv.append("--publish-metrics")
            return argv + list(ctx.recipe.roles[role].extra_args)
        http = mode.public_port if mode.public_port and proc.is_leader else proc.ports["http"]
        tp = args.get("tensor_parallel_size", proc.endpoint.gpu_count)
        argv += ["trtllm-serve", ctx.model_path, "--host", "0.0.0.0", "--port", str(http)]
        argv += ["--tensor_parallel_size", str(tp), "--config", config, "--served_model_name", served]
        return argv + list(ctx.recipe.roles[role].extra_args)

    def numa_wrapper(self, cfg: EngineConfig) -> list[str]:
        """srt-slurm's NUMA script in /configs, when the recipe binds memory or CPUs to the GPU's node."""
        if not isinstance(cfg, TRTLLMEngine) or not (cfg.numa_memory_bind or cfg.numa_cpu_bind):
            return []
        wrapper = ["bash", "/configs/numa_cpu_bind.sh"]
        if cfg.numa_memory_bind:
            wrapper.append("--bind-memory")
        if not cfg.numa_cpu_bind:
            wrapper.append("--no-bind-cpu")
        return wrapper

    def env(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process, mode: WorkerMode) -> dict[str, str]:
        endpoint = proc.endpoint
        env = {
            # torch.distributed rendezvous of the endpoint's ranks, unique per endpoint
            "MASTER_ADDR": ctx.address(endpoint.nodes[0]),
            "MASTER_PORT": str(need_port(proc, TRTLLM_DIST_INIT)),
            # the expert-load-balancer's shared memory segment must not collide between endpoints
            "TRTLLM_EPLB_SHM_NAME": f"srtd_eplb_{ctx.job_id}_{role}_{endpoint.index}",
        }
        if isinstance(cfg, TRTLLMEngine) and cfg.numa_cpu_bind:
            env["TLLM_NUMA_AWARE_WORKER_AFFINITY"] = "0"  # the wrapper pins CPUs; TRT-LLM must not re-pin
        return {**env, **pool_env(ctx, role)}

    def role_preamble(self, ctx: PlanContext, cfg: EngineConfig, role: str, proc: Process) -> str | None:
        return pool_preamble(ctx, role, proc)

    def srun(self, ctx: PlanContext, cfg: EngineConfig, role: str, endpoint: Any) -> Srun:
        base = super().srun(ctx, cfg, role, endpoint)
        options = {**base.options, "kill-on-bad-exit": "1", "ntasks-per-node": str(len(endpoint.gpus))}
        if len(endpoint.nodes) > 1:
            # one host per rank in srtd's node order, so rank 0 runs where MASTER_ADDR points (as srtctl does)
            options["distribution"] = "arbitrary"
        return Srun(
            ntasks=endpoint.gpu_count,
            mpi="pmix",
            oversubscribe=True,
            cpu_bind="verbose,none",
            options=options,
        )

    def readiness(self, ctx: PlanContext, cfg: EngineConfig, proc: Process, mode: WorkerMode) -> Readiness | None:
        ready = super().readiness(ctx, cfg, proc, mode)
        if ready is None or not mode.via_dynamo:
            return ready
        # dynamo.trtllm answers on its system port once the engine is up.
        return Readiness(
            probe=TcpProbe(node=proc.node, port=proc.ports["sys"]),
            timeout_seconds=ready.timeout_seconds,
            interval_seconds=ready.interval_seconds,
        )
