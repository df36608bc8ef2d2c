"""Torch profiling: the variables each profiled worker and the client get (srt-slurm's names; nsys: test_nsys.py)."""

from __future__ import annotations

from tests.plan._util import plan

PROFILED_PD = """\
engine: sglang
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 1, workers: 1}
frontend: {type: sglang-router, enable_multiple_frontends: false}
benchmark: {type: sa-bench, isl: 8, osl: 8, concurrencies: "1"}
profiling:
  type: torch
  prefill: {start_step: 5, stop_step: 15}
"""
ADDRESSES = {"node1": "10.0.0.1", "node2": "10.0.0.2"}


def _profile_env(env: dict[str, str]) -> dict[str, str]:
    exact = ("HEAD_NODE", "HEAD_PORT", "BENCH_MODEL_NAME")
    return {k: v for k, v in env.items() if k.startswith(("PROFIL", "SGLANG_TORCH")) or k in exact}


def test_a_profiled_role_gets_its_window_and_the_engines_profiler_directory() -> None:
    p = plan(PROFILED_PD, addresses=ADDRESSES)
    assert _profile_env(p.unit("prefill_0_node1").env) == {
        "PROFILE_TYPE": "torch",
        "PROFILING_MODE": "prefill",
        "PROFILE_PREFILL_START_STEP": "5",
        "PROFILE_PREFILL_STOP_STEP": "15",
        "SGLANG_TORCH_PROFILER_DIR": "/logs/profiles/prefill",
    }
    # decode has no window: nothing
    assert _profile_env(p.unit("decode_0_node2").env) == {}


def test_the_client_gets_the_windows_and_the_profiled_workers_endpoints() -> None:
    p = plan(PROFILED_PD, addresses=ADDRESSES)
    prefill = p.unit("prefill_0_node1")
    port = prefill.ports["http"]
    assert _profile_env(p.unit("benchmark").env) == {
        "PROFILE_TYPE": "torch",
        "PROFILE_OUTPUT_DIR": "/logs/profiles",
        "BENCH_MODEL_NAME": "m",
        "HEAD_NODE": "node1",
        "HEAD_PORT": "8000",
        "SGLANG_TORCH_PROFILER_DIR": "/logs/profiles",
        "PROFILE_PREFILL_START_STEP": "5",
        "PROFILE_PREFILL_STOP_STEP": "15",
        "PROFILE_PREFILL_IPS": "10.0.0.1",
        "PROFILE_PREFILL_ENDPOINTS": f"10.0.0.1:{port}",
        "PROFILE_WORKER_PORT": str(port),
    }


def test_vllm_writes_where_its_own_variable_says() -> None:
    body = PROFILED_PD.replace("engine: sglang", "engine: vllm").replace("sglang-router", "vllm-router")
    env = plan(body, addresses=ADDRESSES).unit("prefill_0_node1").env
    assert env["VLLM_TORCH_PROFILER_DIR"] == "/logs/profiles/prefill"
    assert "SGLANG_TORCH_PROFILER_DIR" not in env


def test_no_profiling_sets_nothing() -> None:
    quiet = plan(PROFILED_PD.split("profiling:", maxsplit=1)[0], addresses=ADDRESSES)
    assert all(_profile_env(u.env) == {} for u in quiet.units)
