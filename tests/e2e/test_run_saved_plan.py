"""`srtd run PLAN.json` alone, outside an allocation, is supervised in the `srtd` process as it
starts, without click and without the exec (`srtd.cli.saved_plan_alone`): it must be the same
job, with the same words and exit codes, as the command line's `srtd run PLAN.json --plain`."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from srtd.cli import saved_plan_alone
from srtd.errors import EXIT_INPUT, EXIT_PREFLIGHT
from srtd.unit import UnitKind
from tests.command import REPO, run_srtd
from tests.supervisor.helpers import PlanMaker, leftover_processes

GOLDEN_SLURM_PLAN = REPO / "tests" / "plan" / "golden" / "recipes__dynamo__etcd-nats.yaml.json"


@pytest.mark.parametrize(
    ("args", "alone"),
    [
        (["run", "plan.json"], "plan.json"),
        (["run", "/abs/dir/p.json"], "/abs/dir/p.json"),
        (["run", "plan.json", "--plain"], None),  # an option: the command line decides
        (["run", "--json", "plan.json"], None),
        (["run", "recipe.yaml"], None),  # a recipe is planned first
        (["run", ".json"], None),  # a hidden file named .json is no saved plan, as for `srtd run`
        (["run", "-x.json"], None),  # an option's shape: click says what is wrong with it
        (["plan", "plan.json"], None),
        (["run"], None),
        ([], None),
    ],
)
def test_only_a_saved_plan_alone_skips_the_command_line(
    args: list[str], alone: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert saved_plan_alone(args) == alone


def test_inside_an_allocation_the_command_line_reads_the_clusters_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    assert saved_plan_alone(["run", "plan.json"]) is None


def _bad_plans(tmp_path: Path) -> list[tuple[Path, int, str]]:
    not_a_plan = tmp_path / "list.json"
    not_a_plan.write_text("[1, 2]\n")
    return [
        (tmp_path / "missing.json", EXIT_INPUT, ": cannot read: No such file or directory"),
        (GOLDEN_SLURM_PLAN, EXIT_INPUT, " was planned for Slurm; plan it with --local"),
        (not_a_plan, EXIT_INPUT, ": not a plan written by srtd plan --json"),
    ]


def test_a_refused_saved_plan_is_said_as_the_command_line_says_it(tmp_path: Path) -> None:
    for path, code, words in _bad_plans(tmp_path):
        alone = run_srtd("run", str(path))
        given = run_srtd("run", str(path), "--plain")
        assert (alone.returncode, alone.stderr) == (given.returncode, given.stderr)
        assert alone.returncode == code, alone.stderr
        assert alone.stderr.startswith(f"srtd: {path}{words}"), alone.stderr
        assert len(alone.stderr.splitlines()) == 1
        assert "Traceback" not in alone.stderr


def test_a_saved_plan_alone_runs_its_job_with_srtds_environment(tmp_path: Path) -> None:
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-alone")
    seen = tmp_path / "seen.json"
    program = 'import json, os, sys; json.dump({k: os.environ.get(k) for k in sys.argv[2:]}, open(sys.argv[1], "w"))'
    argv = ("python3", "-c", program, str(seen), "SRTCTL_SOURCE_DIR", "SRTD_UNIT")
    maker.unit("once", argv=argv, marker=False, kind=UnitKind.BENCHMARK)
    plan = tmp_path / "plan.json"
    plan.write_text(maker.plan().dumps())
    done = run_srtd("run", str(plan), cwd=tmp_path, env={"SRTD_RUNTIME_DIR": str(tmp_path / "rt")})
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in (maker.log_dir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["state"] == "succeeded"
    assert "unit" not in events[-1]
    assert (maker.log_dir / "plan.json").read_text() == plan.read_text()  # copied as it is
    # the unit inherits what `srtd run` exports: the source directory (where srtd started)
    assert json.loads(seen.read_text()) == {"SRTCTL_SOURCE_DIR": os.path.realpath(tmp_path), "SRTD_UNIT": "once"}


def test_a_node_that_fails_its_early_check_ends_the_job_before_any_launch(tmp_path: Path) -> None:
    """The node's check starts before the supervisor loads (srtd/launch/_early.py); its verdict
    is the preflight's, said and journalled as before, with exit 8 and nothing launched."""
    maker = PlanMaker(root=tmp_path / "job", token="srtdtest-early-check")
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        maker.unit("svc", argv=("sleep", "60"), marker=False, ports={"http": port})
        plan = tmp_path / "plan.json"
        plan.write_text(maker.plan().dumps())
        env = {"SRTD_RUNTIME_DIR": str(tmp_path / "rt")}
        done = run_srtd("run", str(plan), cwd=tmp_path, env=env)
    assert done.returncode == EXIT_PREFLIGHT, done.stderr
    assert f"node node0 failed preflight: ports: port {port} already in use" in done.stderr
    events = [json.loads(line) for line in (maker.log_dir / "events.jsonl").read_text().splitlines()]
    nodes = [e["detail"]["node"] for e in events if "node" in (e.get("detail") or {})]
    # the check's verdict, then the job's end naming the node and the check
    assert [(n["node"], n.get("what"), n["check"]) for n in nodes] == [
        ("node0", "preflight-failed", "ports"),
        ("node0", None, "ports"),
    ]
    assert not [e for e in events if e.get("unit") == "svc" and e["state"] == "starting"]
    assert (events[-1]["state"], events[-1]["exit_code"]) == ("failed", EXIT_PREFLIGHT)
    assert leftover_processes("srtdtest-early-check") == []
