"""vLLM shadow engine recovery (`engine.failover`): the units, their environment and
ports, the restart policy `restart` maps onto, the refused values, and the GMS sidecar's
script run for real under bash with a stand-in memory server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from srtd.unit import RestartMode
from tests.plan._util import load_problems, names, plan

FAILOVER = """\
engine:
  type: vllm
  failover: {{shadow_engines: {shadows}, restart: {restart}, restart_backoff_seconds: 7}}
roles:
  agg: {{nodes: 1, workers: 2, gpus: 2{role_restart}}}
frontend: {{type: dynamo, enable_multiple_frontends: false}}
"""


def _failover(shadows: int = 1, restart: str = "always", role_restart: str = "") -> str:
    return FAILOVER.format(shadows=shadows, restart=restart, role_restart=role_restart)


def test_every_worker_is_a_gms_sidecar_and_its_engines_on_its_node() -> None:
    p = plan(_failover(shadows=2), job_id="77")
    workers = [n for n in names(p) if n.startswith("agg_")]
    assert workers == [
        "agg_0_node1",
        "agg_0_node1_e1",
        "agg_0_node1_e2",
        "agg_1_node1",
        "agg_1_node1_e1",
        "agg_1_node1_e2",
    ]
    gms_units = [n for n in names(p) if n.startswith("service_gms")]
    assert gms_units == ["service_gms_agg_0_node1", "service_gms_agg_1_node1"]
    e2 = p.unit("agg_1_node1_e2")
    assert e2.gpus == (2, 3)
    assert e2.env["CUDA_VISIBLE_DEVICES"] == "2,3"  # numbered from 0, as the sidecar's servers are
    assert "--device-ids" not in e2.argv
    assert {k: e2.env[k] for k in ("ENGINE_ID", "GMS_SOCKET_DIR", "FAILOVER_LOCK_PATH")} == {
        "ENGINE_ID": "2",
        "GMS_SOCKET_DIR": "/dev/shm/srtctl-77/agg_1",
        "FAILOVER_LOCK_PATH": "/dev/shm/srtctl-77/agg_1/failover.lock",
    }
    assert e2.env["DYN_VLLM_GMS_SHADOW_MODE"] == "true"
    assert e2.env["DYN_SYSTEM_STARTING_HEALTH_STATUS"] == "notready"
    argv = list(e2.argv)
    assert argv[argv.index("--load-format") + 1] == "gms"
    assert "--gms-shadow-mode" in argv
    assert argv[argv.index("--dump-config-to") + 1] == "/logs/workers/node1_config_e2.json"
    assert e2.log == "workers/node1_agg_w1_e2.out"
    assert e2.preamble is not None
    assert e2.preamble.startswith("mkdir -p /dev/shm/srtctl-77/agg_1")
    gms = p.unit("service_gms_agg_1_node1")
    assert gms.env["GMS_SOCKET_DIR"] == "/dev/shm/srtctl-77/agg_1"


def test_each_engine_binds_its_own_ports_in_the_workers_block() -> None:
    p = plan(_failover())
    sys_ports = [p.unit(n).ports["sys"] for n in ("agg_0_node1", "agg_0_node1_e1", "agg_1_node1", "agg_1_node1_e1")]
    assert sys_ports == [7500, 7501, 7502, 7503]
    scan = [p.unit(n).env["VLLM_PORT"] for n in ("agg_0_node1", "agg_0_node1_e1", "agg_1_node1")]
    assert scan == ["20000", "20050", "20100"]


def test_engines_have_no_probe_the_frontend_counts_the_serving_ones() -> None:
    p = plan(_failover())
    for name in ("agg_0_node1", "agg_0_node1_e1"):
        assert p.unit(name).readiness is None
        assert p.unit(name).liveness is None
    gate = p.unit("frontend_0").readiness
    assert gate is not None
    assert gate.probe.type == "workers"
    assert gate.probe.expect_decode == 2  # workers, not engines: a standby does not register


def test_restart_always_is_srtds_always_policy_with_a_fixed_delay() -> None:
    p = plan(_failover(role_restart=", restart: {max_restarts: 9}"))
    r = p.unit("agg_0_node1_e1").restart
    assert (r.policy, r.max_restarts, r.backoff_seconds, r.max_backoff_seconds) == (RestartMode.ALWAYS, 9, 7.0, 7.0)
    assert [r.backoff(n) for n in (1, 2, 5)] == [7.0, 7.0, 7.0]


def test_restart_never_leaves_the_roles_own_policy() -> None:
    p = plan(_failover(restart="never", role_restart=", restart: {policy: on-failure, backoff_seconds: 2}"))
    r = p.unit("agg_0_node1").restart
    assert (r.policy, r.backoff_seconds) == (RestartMode.ON_FAILURE, 2.0)
    assert plan(_failover(restart="never")).unit("agg_0_node1").restart.policy is RestartMode.NEVER


@pytest.mark.parametrize(
    ("failover", "problem"),
    [
        ("{restart: sometimes}", ("engine.failover.restart", "must be 'always' or 'never', got 'sometimes'")),
        ("{restart_backoff_seconds: -1}", ("engine.failover.restart_backoff_seconds", "must be 0 or more, got -1")),
        ("{shadow_engines: 0}", ("engine.failover.shadow_engines", "must be 1 or more, got 0")),
        ("{shared_dir: shm}", ("engine.failover.shared_dir", "must be an absolute path, got 'shm'")),
    ],
)
def test_bad_failover_values_are_one_line_with_their_location(failover: str, problem: tuple[str, str]) -> None:
    body = f"engine: {{type: vllm, failover: {failover}}}\nroles:\n  agg: {{nodes: 1, workers: 1}}\n"
    [(line, path, message)] = load_problems(body)
    assert (line, path) == (6, problem[0])
    assert message == problem[1]


def _gms_script(tmp_path: Path, devices: int) -> list[str]:
    p = plan(_failover().replace("gpus: 2", f"gpus: {devices}"), job_id="5")
    argv = list(p.unit("service_gms_agg_0_node1").argv)
    assert argv[:2] == ["bash", "-c"]
    return ["bash", "-c", argv[2].replace("/dev/shm/srtctl-5", str(tmp_path / "shm"))]


FAKE_SERVER = """\
#!/bin/bash
# stand-in for `python3 -m gpu_memory_service --device N`: two sockets, then serve until told
[ "$1 $2 $3" = "-m gpu_memory_service --device" ] || exit 64
: > "$GMS_SOCKET_DIR/gms_$4_weights.sock"; : > "$GMS_SOCKET_DIR/gms_$4_kv.sock"
[ -n "${GMS_FAIL:-}" ] && { sleep 1.5; exit 3; }
trap 'exit 0' TERM; while :; do sleep 0.1; done
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(FAKE_SERVER)
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_gms_script_says_ready_once_every_socket_exists_and_cleans_up_on_term(
    tmp_path: Path, fake_python: dict[str, str]
) -> None:
    proc = subprocess.Popen(_gms_script(tmp_path, 2), env=fake_python, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    directory = tmp_path / "shm" / "agg_0"
    assert line == f"GMS ready: 2 device(s), 4 sockets in {directory}\n"
    assert sorted(p.name for p in directory.iterdir()) == [
        "gms_0_kv.sock",
        "gms_0_weights.sock",
        "gms_1_kv.sock",
        "gms_1_weights.sock",
    ]
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert not directory.exists()


def test_gms_script_fails_with_the_servers_exit_and_says_why(tmp_path: Path, fake_python: dict[str, str]) -> None:
    env = {**fake_python, "GMS_FAIL": "1"}
    done = subprocess.run(_gms_script(tmp_path, 1), check=False, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == f"GMS ready: 1 device(s), 2 sockets in {tmp_path}/shm/agg_0\n"
    assert done.stderr == "GMS server exited (code=3); stopping the rest\n"
