"""The per-node preflight check (docs/nodes.md), run as the real program against `srtd-toy-gpus`:
each check's verdict and evidence, the GPU query's CSV, a missing query program, and the
supervisor's reading of the verdict line and of the engines' memory flags."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from srtd.launch import ToolRun
from srtd.supervisor._preflight import CHECK_PROGRAM, memory_fraction, verdict_of

TOY = f"{sys.executable} -m srtd.toy.gpus"


def _config(tmp_path: Path, config: dict[str, object]) -> str:
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"{TOY} --config {path}"


def _check(tmp_path: Path, *args: str, node: str = "node1") -> dict[str, object]:
    # as the supervisor runs it: by its path, isolated and without site-packages (srtd is not
    # importable there, so a check that imported anything of srtd's would fail every test)
    argv = [sys.executable, "-I", "-S", CHECK_PROGRAM, f"--node={node}", f"--log-dir={tmp_path}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == ""
    said: dict[str, object] = json.loads(done.stdout)
    return said


def test_the_toy_answers_nvidia_smis_queries(tmp_path: Path) -> None:
    query = _config(tmp_path, {"gpus": 2, "nodes": {"n2": {"apps": [{"gpu": 1, "pid": 7, "used_mib": 512}]}}})
    base = [*query.split(), "--format=csv,noheader,nounits"]
    env = {"SRTD_NODE": "n1", "PATH": "/usr/bin:/bin"}
    gpus = subprocess.run(
        [*base, "--query-gpu=index,uuid,memory.total,memory.free"], capture_output=True, text=True, env=env, check=True
    )
    assert gpus.stdout == "0, GPU-toy-n1-0, 81559, 81000\n1, GPU-toy-n1-1, 81559, 81000\n"
    apps = subprocess.run(
        [*base, "--query-compute-apps=gpu_uuid,pid,used_memory"], capture_output=True, text=True, env=env, check=True
    )
    assert apps.stdout == ""
    env["SRTD_NODE"] = "n2"
    apps = subprocess.run(
        [*base, "--query-compute-apps=gpu_uuid,pid,used_memory"], capture_output=True, text=True, env=env, check=True
    )
    assert apps.stdout == "GPU-toy-n2-1, 7, 512\n"


def test_a_healthy_node_passes(tmp_path: Path) -> None:
    query = _config(tmp_path, {"gpus": 4})
    said = _check(tmp_path, "--gpus=0,1", "--memory-fraction=0.9", f"--gpu-query={query}")
    assert said == {"ok": True, "check": None, "evidence": None, "notes": []}


def test_a_foreign_process_on_a_planned_gpu_fails_the_node(tmp_path: Path) -> None:
    apps = [{"gpu": 1, "pid": 4242, "used_mib": 30000}, {"gpu": 3, "pid": 99, "used_mib": 1}]
    query = _config(tmp_path, {"nodes": {"node2": {"apps": apps}}})
    said = _check(tmp_path, "--gpus=0,1", f"--gpu-query={query}", node="node2")
    assert said["ok"] is False
    assert said["check"] == "gpus-foreign"
    assert said["evidence"] == "pid 4242 holds 30000 MiB on GPU 1"  # GPU 3 is not the plan's
    assert _check(tmp_path, "--gpus=0,1", f"--gpu-query={query}", node="node1")["ok"] is True


def test_a_gpu_the_plan_gives_must_be_visible(tmp_path: Path) -> None:
    query = _config(tmp_path, {"gpus": 2})
    said = _check(tmp_path, "--gpus=1,2,3", f"--gpu-query={query}")
    assert (said["check"], said["evidence"]) == ("gpus-visible", "GPU 2, 3 not listed (2 visible)")


def test_free_memory_must_cover_the_engines_share(tmp_path: Path) -> None:
    query = _config(tmp_path, {"gpus": 1, "total_mib": 1000, "free_mib": 500})
    said = _check(tmp_path, "--gpus=0", "--memory-fraction=0.8", f"--gpu-query={query}")
    assert (said["check"], said["evidence"]) == (
        "gpus-memory",
        "GPU 0 has 500 MiB free of 1000 MiB, the engine asks for 0.8",
    )
    assert _check(tmp_path, "--gpus=0", "--memory-fraction=0.4", f"--gpu-query={query}")["ok"] is True


def test_a_query_that_fails_fails_the_node(tmp_path: Path) -> None:
    query = _config(tmp_path, {"fail": "NVIDIA-SMI has failed because it couldn't communicate with the driver"})
    said = _check(tmp_path, "--gpus=0", f"--gpu-query={query}")
    assert said["check"] == "gpus-visible"
    assert str(said["evidence"]).endswith(
        "--query-gpu=index,uuid,memory.total,memory.free exited 9: "
        "toy: NVIDIA-SMI has failed because it couldn't communicate with the driver"
    )


def test_no_query_program_skips_the_gpu_checks_with_a_note(tmp_path: Path) -> None:
    said = _check(tmp_path, "--gpus=0", "--gpu-query=srtd-no-such-smi")
    assert said == {
        "ok": True,
        "check": None,
        "evidence": None,
        "notes": ["GPU checks skipped: srtd-no-such-smi not found"],
    }


def test_a_port_in_use_fails_the_node(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        said = _check(tmp_path, f"--ports={port}")
    assert (said["check"], said["evidence"]) == ("ports", f"port {port} already in use")


def test_an_unwritable_log_dir_fails_the_node(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    argv = [sys.executable, "-m", "srtd.launch._node_check", "--node=n", f"--log-dir={missing}"]
    said = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout)
    assert said["check"] == "log-dir"
    assert said["evidence"] == f"cannot create a file in {missing}: No such file or directory"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("serve", "--mem-fraction-static", "0.85"), 0.85),
        (("serve", "--gpu-memory-utilization=0.7"), 0.7),
        (("serve", "--mem-fraction-static"), 0.0),  # no value
        (("serve", "--port", "0.9"), 0.0),  # not a memory flag
    ],
)
def test_the_memory_share_comes_from_the_named_flags(argv: tuple[str, ...], expected: float) -> None:
    assert memory_fraction(argv, ("--mem-fraction-static", "--gpu-memory-utilization")) == expected


def test_the_verdict_is_the_last_json_line_and_silence_fails() -> None:
    line = '{"ok": false, "check": "ports", "evidence": "port 1 already in use", "notes": []}'
    run = ToolRun(("srun",), 0, "srun: chatter\n" + line + "\n", "")
    verdict = verdict_of("n1", run, 1.5, 60)
    assert (verdict.ok, verdict.check, verdict.evidence) == (False, "ports", "port 1 already in use")
    silent = verdict_of("n1", ToolRun(("srun",), None, "", "timed out after 60 s"), 60.0, 60)
    assert (silent.ok, silent.check, silent.evidence) == (False, "answer", "no answer within 60 s")
    broken = verdict_of("n1", ToolRun(("srun",), 1, "", "srun: error: Unable to create step"), 0.2, 60)
    assert (broken.check, broken.evidence) == ("answer", "the check did not run: srun: error: Unable to create step")


def test_the_log_dir_check_leaves_nothing_behind(tmp_path: Path) -> None:
    said = _check(tmp_path)
    assert said == {"ok": True, "check": None, "evidence": None, "notes": []}
    assert list(tmp_path.iterdir()) == []
