"""Nsight Systems in the plan: `profiling.type: nsys`/`nsys-time` and `observability.enabled`.

The argv srtd puts before each command and the variables each process gets, exactly (the
flags and names are srt-slurm's: docs/engines.md, "Nsight Systems profiling and observability").
"""

from __future__ import annotations

import json

from srtd.cluster import Cluster
from srtd.unit import Plan
from tests.plan._util import HEAD, plan

TWO = {"node1": "10.0.0.1", "node2": "10.0.0.2"}
PD = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
benchmark: {type: custom, command: "true"}
profiling:
  type: nsys
  prefill: {start_step: 5, stop_step: 15}
"""
OBSERVED = HEAD.replace(
    "observability: {tachometer: {enabled: false}}", "observability: {enabled: true, tachometer: {enabled: false}}"
)
AGG = """\
engine: vllm
roles:
  agg: {nodes: 1, workers: 1, gpus: 2}
frontend: {type: dynamo, enable_multiple_frontends: false}
benchmark: {type: custom, command: "true"}
"""
SAMPLING = [
    "--gpu-metrics-devices=none",
    "--sample=system-wide",
    "--cpuctxsw=system-wide",
    "--sampling-period=26000000",
    "--samples-per-backtrace=32",
]


def _before(argv: tuple[str, ...], program: str) -> list[str]:
    """The wrapper: everything before the worker's own program."""
    return list(argv[: argv.index(program)])


def _observed(body: str = AGG, head: str = OBSERVED, **kwargs: object) -> Plan:
    return plan(body, head=head, addresses={"node1": "10.0.0.1"}, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- profiling.type


def test_nsys_wraps_a_windowed_worker_in_a_cuda_profiler_range_capture() -> None:
    p = plan(PD, addresses=TWO)
    assert _before(p.unit("prefill_0_node1").argv, "python3") == [
        "nsys", "profile", "-t", "cuda,nvtx", "--cuda-graph-trace=node",
        "-c", "cudaProfilerApi", "--capture-range-end", "stop", "--force-overwrite", "true",
        "-o", "/logs/profiles/prefill/node1_prefill_w0_profile_gpu0-7",
    ]  # fmt: skip
    env = p.unit("prefill_0_node1").env
    assert {k: env[k] for k in env if k.startswith("PROFIL")} == {
        "PROFILE_TYPE": "nsys",
        "PROFILING_MODE": "prefill",
        "PROFILE_PREFILL_START_STEP": "5",
        "PROFILE_PREFILL_STOP_STEP": "15",
    }
    assert "SGLANG_TORCH_PROFILER_DIR" not in env  # the torch profiler's directory is torch's
    # decode has no window: it runs as it would unprofiled
    assert p.unit("decode_0_node2").argv[0] == "python3"
    assert p.unit("benchmark").env["PROFILE_TYPE"] == "nsys"
    assert p.warnings == ()


def test_nsys_time_captures_a_span_and_extra_args_come_last_before_the_output() -> None:
    body = PD.replace(
        "type: nsys", "type: nsys-time\n  delay_secs: 60\n  duration_secs: 30\n  extra_nsys_args: [--stats=false]"
    )
    assert _before(plan(body, addresses=TWO).unit("prefill_0_node1").argv, "python3") == [
        "nsys", "profile", "-t", "cuda,nvtx", "--cuda-graph-trace=node", "--force-overwrite", "true",
        "--delay", "60", "--duration", "30", "--stats=false",
        "-o", "/logs/profiles/prefill/node1_prefill_w0_profile_gpu0-7",
    ]  # fmt: skip


def test_a_dynamo_worker_is_followed_across_its_exec_unless_the_recipe_says_not() -> None:
    body = PD.replace("sglang-router", "dynamo")
    wrapper = _before(plan(body, addresses=TWO).unit("prefill_0_node1").argv, "python3")
    assert wrapper[-3:] == [
        "--trace-fork-before-exec=true",
        "-o",
        "/logs/profiles/prefill/node1_prefill_w0_profile_gpu0-7",
    ]
    body = body.replace("type: nsys", "type: nsys\n  trace_fork_before_exec: false")
    assert "--trace-fork-before-exec=true" not in plan(body, addresses=TWO).unit("prefill_0_node1").argv


def test_an_mpi_engine_gets_its_own_flags_one_report_per_rank_and_the_executors_step_range() -> None:
    body = """\
engine: trtllm
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 1, workers: 1}
frontend: {type: dynamo, enable_multiple_frontends: false}
profiling:
  type: nsys
  prefill: {start_step: 3, stop_step: 9}
  decode: {start_step: 3, stop_step: 9}
"""
    unit = plan(body, addresses=TWO).unit("decode_0_node2")
    assert _before(unit.argv, "trtllm-llmapi-launch") == [
        "nsys", "profile", "-t", "cuda,nvtx,ucx", "--sample=none", "--cuda-graph-trace=node",
        "-c", "cudaProfilerApi", "--capture-range-end", "stop",
        "--kill", "none", "--wait", "all", "--force-overwrite", "true",
        "-o", "/logs/profiles/decode/node2_decode_w0_profile_rank%q{SLURM_PROCID}",
    ]  # fmt: skip
    assert unit.env["TLLM_PROFILE_START_STOP"] == "3-9"
    assert unit.env["TLLM_LLMAPI_ENABLE_NVTX"] == "1"


def test_capture_scope_selected_wraps_only_the_chosen_worker() -> None:
    body = PD.replace("prefill: {nodes: 1, workers: 1}", "prefill: {nodes: 2, workers: 2}").replace(
        "{start_step: 5, stop_step: 15}", "{start_step: 5, stop_step: 15, capture_scope: selected, worker_index: 1}"
    )
    p = plan(body, addresses={**TWO, "node3": "10.0.0.3"})
    firsts = {u.name: u.argv[0] for u in p.units if u.role == "prefill"}
    assert firsts == {"prefill_0_node1": "python3", "prefill_1_node2": "nsys"}


def test_the_profilers_library_paths_come_first_in_ld_library_path_quoted() -> None:
    body = PD.replace("type: nsys", "type: nsys\n  nsys_library_paths: [/opt/nsys lib, /usr/local/cuda/compat]")
    preamble = plan(body, addresses=TWO).unit("prefill_0_node1").preamble or ""
    assert preamble.splitlines()[0] == (
        "export LD_LIBRARY_PATH='/opt/nsys lib:/usr/local/cuda/compat'\"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\""
    )


def test_the_cluster_names_the_nsys_binary() -> None:
    cluster = Cluster(binaries={"nsys": "/opt/nsight/bin/nsys"})
    assert plan(PD, cluster, addresses=TWO).unit("prefill_0_node1").argv[0] == "/opt/nsight/bin/nsys"


# --------------------------------------------------------------------------- observability.enabled


def test_observability_wraps_the_worker_in_the_window_program_with_srt_slurms_spec() -> None:
    p = _observed()
    unit = p.unit("agg_0_node1")
    wrapper = _before(unit.argv, "python3")
    assert wrapper == []  # the window program is itself run with python3
    assert list(unit.argv[:4]) == ["python3", "/logs/profiles/nsys_window.py", "worker", "--spec"]
    assert json.loads(unit.argv[4]) == {
        "control_dir": "/logs/profiles/.control",
        "step": "agg_0_node1",
        "ranks": 1,
        "nsys": "nsys",
        "start_args": SAMPLING,
        "output": "/logs/profiles/agg/node1_agg_w0_profile_gpu0-1",
        "timeout": 1800,
    }
    assert unit.argv[5:8] == ("--", "python3", "-m")
    assert unit.terminate_timeout == 1950.0  # the report budget, then the application's shutdown
    expected = {
        "DYN_LOGGING_SPAN_EVENTS": "true",
        "DYN_LOGGING_JSONL": "true",
        "DYN_LOG": "debug",
        "DYN_NVTX": "1",
        "DYN_ENABLE_RUST_NVTX": "1",
        "VLLM_NVTX_SCOPES_FOR_PROFILING": "1",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "SRT_NSYS_REPORT_BARRIER_DIR": "/logs/profiles/.stopped/agg_0_node1",
        "SRT_NSYS_REPORT_EXPECTED": "1",
        "SRT_NSYS_REPORT_STOP_TIMEOUT": "1800",
    }
    assert {k: unit.env[k] for k in expected} == expected
    assert "DYN_REQUEST_TRACE" not in unit.env  # workers keep no request trace


def test_observability_wraps_the_dynamo_frontend_and_gives_it_the_request_trace() -> None:
    unit = _observed().unit("frontend_0")
    assert json.loads(unit.argv[4])["output"] == "/logs/profiles/frontend/node1_frontend_0"
    assert unit.argv[5:] == ("--", "python3", "-m", "dynamo.frontend", "--http-port=8000")
    expected = {
        "DYN_LOG": "debug",
        "DYN_REQUEST_TRACE": "1",
        "DYN_REQUEST_TRACE_FILE_PATH": "/logs/dynamo-request-trace",
        "DYN_NVTX": "1",
        "SRT_NSYS_REPORT_BARRIER_DIR": "/logs/profiles/.stopped/frontend_0",
    }
    assert {k: unit.env[k] for k in expected} == expected
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in unit.env  # an engine's variables are its workers'


def test_the_client_gets_the_window_hooks_and_the_plan_writes_the_program_and_who_takes_part() -> None:
    p = _observed()
    env = p.unit("benchmark").env
    assert {k: env[k] for k in env if k.startswith("SRT_NSYS")} == {
        "SRT_NSYS_CONTROL_DIR": "/logs/profiles/.control",
        "SRT_NSYS_CONTROL_SCRIPT": "/logs/profiles/nsys_window.py",
        "SRT_NSYS_CONTROL_TIMEOUT": "1800",
    }
    logs = p.log_dir
    steps = {k: v for k, v in p.files.items() if "/.control/steps/" in k}
    assert steps == {
        f"{logs}/profiles/.control/steps/agg_0_node1.json": '{"ranks": 1}\n',
        f"{logs}/profiles/.control/steps/frontend_0.json": '{"ranks": 1}\n',
    }
    assert p.files[f"{logs}/profiles/nsys_window.py"].startswith('"""srtd\'s Nsight Systems window')


def test_the_recipes_own_variables_win_over_the_preset() -> None:
    body = AGG.replace("gpus: 2}", "gpus: 2, env: {DYN_LOG: info, VLLM_WORKER_MULTIPROC_METHOD: fork}}")
    body += "environment: {DYN_NVTX: '0'}\n"
    env = _observed(body).unit("agg_0_node1").env
    assert (env["DYN_LOG"], env["VLLM_WORKER_MULTIPROC_METHOD"], env["DYN_NVTX"]) == ("info", "fork", "0")
    assert env["DYN_LOGGING_JSONL"] == "true"


def test_nsys_off_or_explicit_profiling_keeps_the_logging_but_no_window() -> None:
    for head in (
        OBSERVED.replace("enabled: true,", "enabled: true, nsys: {enabled: false},"),
        OBSERVED + "profiling: {type: torch, aggregated: {start_step: 1, stop_step: 2}}\n",
    ):
        p = _observed(head=head)
        unit = p.unit("agg_0_node1")
        assert unit.argv[:3] == ("python3", "-m", "dynamo.vllm")
        assert unit.env["DYN_LOGGING_JSONL"] == "true"
        assert "DYN_NVTX" not in unit.env
        assert not any(k.startswith("SRT_NSYS") for k in p.unit("benchmark").env)
        assert not any("nsys_window" in k for k in p.files)


def test_including_startup_profiles_from_launch_to_teardown_without_the_client() -> None:
    head = OBSERVED.replace(
        "enabled: true,", "enabled: true, nsys: {capture_window: including_startup, cpu_sampling: none},"
    )
    p = _observed(head=head)
    assert _before(p.unit("agg_0_node1").argv, "python3") == [
        "nsys", "profile", "--force-overwrite=true", "--trace=nvtx",
        "--gpu-metrics-devices=none", "--sample=none", "--cpuctxsw=none",
        "-o", "/logs/profiles/agg/node1_agg_w0_profile_gpu0-1",
    ]  # fmt: skip
    assert not any(k.startswith("SRT_NSYS_CONTROL") for k in p.unit("benchmark").env)


def test_without_observability_nothing_changes() -> None:
    unit = _observed(head=HEAD).unit("agg_0_node1")
    assert unit.argv[:3] == ("python3", "-m", "dynamo.vllm")
    assert not any(k.startswith(("DYN_LOGGING", "DYN_NVTX", "SRT_NSYS", "VLLM_NVTX")) for k in unit.env)
    assert unit.terminate_timeout == 30.0


def test_replicas_are_captured_and_nginx_in_front_of_them_is_left_alone() -> None:
    body = """\
engine: vllm
roles:
  agg: {nodes: 2, workers: 2}
frontend: {type: dynamo, enable_multiple_frontends: true, num_additional_frontends: 1}
"""
    p = plan(body, head=OBSERVED, addresses=TWO)
    wrapped = {u.name: u.argv[1] == "/logs/profiles/nsys_window.py" for u in p.units if u.kind == "frontend"}
    assert wrapped == {"frontend_0": True, "frontend_1": True, "nginx": False}
    assert not any(k.startswith(("DYN_LOG", "DYN_REQUEST", "DYN_NVTX")) for k in p.unit("nginx").env)


def test_a_router_frontend_gets_the_logging_but_only_dynamo_processes_are_captured() -> None:
    body = """\
engine: sglang
roles:
  agg: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
"""
    p = _observed(body)
    router = p.unit("frontend_0")
    assert router.argv[:3] == ("python3", "-m", "sglang_router.launch_router")
    assert (router.env["DYN_LOG"], router.env["DYN_REQUEST_TRACE"]) == ("debug", "1")
    assert "DYN_NVTX" not in router.env
    # the worker is captured whatever the frontend (srt-slurm wraps every worker process)
    assert p.unit("agg_0_node1").argv[1] == "/logs/profiles/nsys_window.py"


def test_newer_frontend_cpu_sampling_samples_on_the_frontend_only() -> None:
    head = OBSERVED.replace("enabled: true,", "enabled: true, nsys: {frontend_cpu_sampling: true},")
    p = _observed(head=head)
    assert json.loads(p.unit("agg_0_node1").argv[4])["start_args"] == [
        "--sample=none",
        "--cpuctxsw=none",
        "--gpu-metrics-devices=none",
    ]
    assert json.loads(p.unit("frontend_0").argv[4])["start_args"] == [
        "--sample=system-wide",
        "--cpuctxsw=none",
        "--gpu-metrics-devices=none",
        "--sampling-period=26000000",
        "--samples-per-backtrace=32",
    ]
    off = _observed(head=head.replace("frontend_cpu_sampling: true", "frontend_cpu_sampling: false"))
    assert json.loads(off.unit("frontend_0").argv[4])["start_args"][0] == "--sample=none"
