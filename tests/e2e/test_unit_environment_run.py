"""The environment a unit gets in a real local `srtd run`: the one docs/recipe.md promises.

- A custom benchmark runs with srtd's own PATH even where a login profile would set PATH
  anew (Debian's /etc/profile does, for every user): a venv's program stays reachable.
- `$SRTCTL_SOURCE_DIR` (srt-slurm's checkout variable) names the directory srtd runs in,
  so upstream's node-hooks example, `bash ${SRTCTL_SOURCE_DIR}/configs/node-hooks.sh pre`,
  runs the script there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.command import run_srtd
from tests.supervisor.helpers import check_journal

pytestmark = pytest.mark.slow

RECIPE = """\
schema: 2
name: unit-environment
model: {{path: "hf:srtd/toy", container: toy, precision: bf16}}
resources: {{gpu_type: cpu, gpus_per_node: 1}}
engine: {{type: toy, token_latency_ms: 1}}
roles:
  agg: {{nodes: 1, workers: 1, gpus: 1}}
frontend: {{type: toy-router, enable_multiple_frontends: false}}
observability: {{tachometer: {{enabled: false}}}}
{rest}
"""

# What the tool of the venv writes: its arguments, and that it ran.
TOOL = '#!/bin/sh\necho "ran: $*" > "$SRTD_LOG_DIR/venv-tool.txt"\n'
# Sets PATH anew, as Debian's /etc/profile does: the state of a login shell on such a host.
LOGIN_PROFILE = "PATH=/usr/local/bin:/usr/bin:/bin\nexport PATH\n"
# upstream's configs/node-hooks.sh, reduced to what shows it ran and where
HOOK = 'echo "$1 from $(dirname "$0")" >> "$SRTD_LOG_DIR/hooks.txt"\n'


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_custom_benchmark_runs_a_program_of_the_venv_first_on_path(tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    executable(venv_bin / "only-in-venv", TOOL)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(LOGIN_PROFILE)
    recipe = tmp_path / "venv.yaml"
    recipe.write_text(RECIPE.format(rest="benchmark: {type: custom, command: 'only-in-venv one two'}"))
    log_dir = tmp_path / "logs"
    env = {"PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}
    done = run_srtd("run", str(recipe), "--log-dir", str(log_dir), "--plain", cwd=tmp_path, env=env, timeout=180)
    bench_log = log_dir / "benchmark.out"
    assert done.returncode == 0, done.stdout + done.stderr + (bench_log.read_text() if bench_log.exists() else "")
    assert (log_dir / "venv-tool.txt").read_text() == "ran: one two\n"
    journal = check_journal(log_dir / "events.jsonl", [])
    assert [e.exit_code for e in journal if e.unit == "benchmark" and e.state == "stopped"] == [0]


def test_upstreams_node_hook_runs_the_script_under_the_directory_srtd_runs_in(tmp_path: Path) -> None:
    source = tmp_path / "checkout"
    (source / "configs").mkdir(parents=True)
    (source / "configs" / "node-hooks.sh").write_text(HOOK)
    recipe = source / "hooks.yaml"
    hooks = (
        "host_setup:\n"
        "  commands: ['bash ${SRTCTL_SOURCE_DIR}/configs/node-hooks.sh pre']\n"
        "  teardown: ['bash ${SRTCTL_SOURCE_DIR}/configs/node-hooks.sh post HOOK_SNAPSHOT=0']\n"
        "benchmark: {type: toy, num_requests: 2, concurrency: 1, max_tokens: 2}"
    )
    recipe.write_text(RECIPE.format(rest=hooks))
    log_dir = tmp_path / "logs"
    env = {"SRTCTL_SOURCE_DIR": ""}  # unset (empty) in the user's shell: srtd gives it
    done = run_srtd("run", "hooks.yaml", "--log-dir", str(log_dir), "--plain", cwd=source, env=env, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (log_dir / "hooks.txt").read_text() == f"pre from {source}/configs\npost from {source}/configs\n"
