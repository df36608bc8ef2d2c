"""The per-node preflight check (docs/nodes.md), run as the real program against `srtd-toy-gpus`:
each check's verdict and evidence, the GPU query's CSV, a missing query program, and the
supervisor's reading of the verdict line and of the engines' memory flags; what the check
loads, its options, and its line as json.dumps writes it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from srtd.launch import ToolRun
from srtd.launch._node_check import Verdict, options
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


# what the check does without: each costs milliseconds of every job's start (the module docstring)
NOT_LOADED = ("argparse", "re", "enum", "socket", "json", "json.decoder", "json.encoder", "os", "shlex", "subprocess")


def _imported(tmp_path: Path, *args: str) -> set[str]:
    """The modules the check imports, as the supervisor runs it, from `-X importtime`."""
    argv = [sys.executable, "-I", "-S", "-X", "importtime", CHECK_PROGRAM, "--node=n", f"--log-dir={tmp_path}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout)["ok"] is True
    return {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_the_check_imports_only_what_it_needs(tmp_path: Path) -> None:
    loaded = _imported(tmp_path, "--ports=0", "--gpus=0,1", "--memory-fraction=0.8", "--gpu-query=")
    assert {"_socket", "_json"} <= loaded  # it ran its checks, and the list was read
    assert sorted(loaded.intersection(NOT_LOADED)) == []
    # a GPU query (here a missing program) loads what running it needs
    assert {"shlex", "subprocess"} <= _imported(tmp_path, "--gpu-query=srtd-no-such-smi")


def test_options_come_in_either_form() -> None:
    expected = ("n1", "/logs", [8000, 8001], [0, 1], 0.8, "nvidia-smi -i 0")
    given = {"node": "n1", "log-dir": "/logs", "ports": "8000,8001", "gpus": "0,1", "memory-fraction": "0.8"}
    joined = [f"--{name}={value}" for name, value in given.items()]
    assert options([*joined, "--gpu-query=nvidia-smi -i 0"]) == expected
    apart = [part for name, value in given.items() for part in (f"--{name}", value)]
    assert options([*apart, "--gpu-query", "nvidia-smi -i 0"]) == expected
    # the defaults, a value holding `=`, an empty value, and the last of a name counts
    assert options(["--log-dir=/l", "--node=a=b"]) == ("a=b", "/l", [], [], 0.0, "")
    assert options(["--node", "n", "--log-dir", "/l", "--gpus=", "--ports=1", "--ports", "2"])[2:4] == ([2], [])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--log-dir=/l"], "the following arguments are required: --node"),
        (["--ports=1"], "the following arguments are required: --node, --log-dir"),
        (["--node=n", "--log-dir=/l", "--port=1"], "unrecognized arguments: --port=1"),
        (["--node=n", "--log-dir=/l", "extra"], "unrecognized arguments: extra"),
        (
            ["--node=n", "--log-dir=/l", "--memory-fraction=most"],
            "argument --memory-fraction: invalid float value: 'most'",
        ),
        (["--node=n", "--log-dir=/l", "--memory-fraction", "0,9"], "argument --memory-fraction: invalid float value"),
        (["--node=n", "--log-dir=/l", "--ports=80,http"], "argument --ports: invalid int list: '80,http'"),
        (["--node=n", "--log-dir=/l", "--gpus", "0;1"], "argument --gpus: invalid int list: '0;1'"),
        (["--node", "--log-dir=/l"], "argument --node: expected one argument"),
        (["--node=n", "--log-dir"], "argument --log-dir: expected one argument"),
    ],
)
def test_a_bad_command_line_is_one_usage_line_and_exit_2(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", CHECK_PROGRAM, *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"_node_check.py: error: {message}")
    assert "usage: --node=NODE --log-dir=DIR" in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.endswith("\n")


NASTY = [
    'he said "no"',
    "C:\\path\\ends\\",
    "".join(map(chr, range(32))) + "\x7f",  # every control character
    "caf\u00e9 \u00fc\u00df \u4e2d\u6587 \u2713 \U0001f600 \u2028\u2029 \ud800",  # non-ASCII, astral, a lone surrogate
    "".join(map(chr, range(0x3000))),
    "",
]


@pytest.mark.parametrize("text", NASTY)
def test_the_line_is_json_dumps_byte_for_byte(text: str) -> None:
    verdict = Verdict()
    verdict.fail("gpus-visible", text)
    verdict.notes.extend([text, "GPU checks skipped: x not found"])
    assert verdict.line() == json.dumps(
        {"ok": False, "check": "gpus-visible", "evidence": text, "notes": [text, "GPU checks skipped: x not found"]}
    )
    assert Verdict().line() == json.dumps({"ok": True, "check": None, "evidence": None, "notes": []})


def test_the_printed_line_is_json_dumps_of_the_verdict(tmp_path: Path) -> None:
    # evidence from the query program's own words: quotes, a backslash, a tab, a control character, non-ASCII
    words = 'driver "535" said \\ no\tto\x01 caf\u00e9 \u2713 \U0001f600'
    query = _config(tmp_path, {"fail": words})
    argv = [sys.executable, "-I", "-S", CHECK_PROGRAM, "--node=n", f"--log-dir={tmp_path}", f"--gpu-query={query}"]
    line = subprocess.run(argv, capture_output=True, timeout=60, check=True).stdout
    said = json.loads(line)
    assert said["evidence"].endswith(f"exited 9: toy: {words}")
    assert line == (json.dumps(said) + "\n").encode()


def test_a_port_left_in_time_wait_is_free(tmp_path: Path) -> None:
    # an engine that served there (asyncio and uvicorn set SO_REUSEADDR) leaves a closed
    # connection's end in TIME_WAIT on the port: the check binds with SO_REUSEADDR too, as
    # the next engine will, so that does not count as the port in use
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            served, _ = listener.accept()
            served.close()  # this end closes first: it waits in TIME_WAIT on the port
            client.recv(1)
    assert _check(tmp_path, f"--ports={port}") == {"ok": True, "check": None, "evidence": None, "notes": []}
