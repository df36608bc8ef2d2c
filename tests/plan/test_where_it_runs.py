"""`srtd plan` shows where `srtd run` would run the job: one rule, `runs_locally`, for both.

Outside an allocation `plan` used to plan for Slurm (`srun --jobid=local ...`, a warning
about the container alias) while `run` ran the job on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srtd.cli._inputs import PlanChoice, runs_locally
from srtd.errors import UsageError
from tests.command import REPO, run_srtd

DEMO = REPO / "recipes" / "local" / "demo.yaml"


@pytest.mark.parametrize(
    ("choice", "slurm", "job", "local"),
    [
        (PlanChoice(), False, None, True),  # outside an allocation: this machine
        (PlanChoice(), False, "77", False),  # inside one: Slurm steps
        (PlanChoice(local=True), False, "77", True),  # --local wins
        (PlanChoice(), True, None, False),  # plan --slurm / --sbatch
        (PlanChoice(nodes_text="n[1-2]"), False, None, False),  # plan --nodes
    ],
)
def test_the_one_rule(
    monkeypatch: pytest.MonkeyPatch, choice: PlanChoice, slurm: bool, job: str | None, local: bool
) -> None:
    if job is None:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    else:
        monkeypatch.setenv("SLURM_JOB_ID", job)
    assert runs_locally(choice, slurm=slurm) is local


def test_local_and_slurm_together_are_refused() -> None:
    with pytest.raises(UsageError, match=r"^--local plans for this machine; --slurm and --sbatch plan for Slurm$"):
        runs_locally(PlanChoice(local=True), slurm=True)
    with pytest.raises(UsageError, match=r"^--local plans for this machine; --nodes does not apply$"):
        runs_locally(PlanChoice(local=True, nodes_text="n1"))


def test_outside_an_allocation_plan_shows_the_local_run_that_run_does(tmp_path: Path) -> None:
    shown = run_srtd("plan", str(DEMO), "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == ""  # no container alias warning: a local run uses no containers
    plan = json.loads(shown.stdout)
    assert plan["local"] is True
    assert "srun_lines" not in plan  # absent when empty (docs/plan.md)
    assert all(u["container"] is None for u in plan["units"])
    assert plan == json.loads(run_srtd("plan", str(DEMO), "--json", "--local", cwd=tmp_path).stdout)
    text = run_srtd("plan", str(DEMO), cwd=tmp_path)
    assert "local (this machine)" in text.stdout
    assert "srun" not in text.stdout

    ran = run_srtd("run", str(DEMO), "--plain", "--log-dir", str(tmp_path / "logs"), cwd=tmp_path, timeout=180)
    assert ran.returncode == 0, ran.stderr
    saved = json.loads((tmp_path / "logs" / "plan.json").read_text())
    assert (saved["local"], "srun_lines" in saved) == (True, False)


def test_plan_for_slurm_from_outside(tmp_path: Path) -> None:
    for args in (("--slurm",), ("--nodes", "gpu-[1-2]")):
        shown = run_srtd("plan", str(DEMO), "--json", *args, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        plan = json.loads(shown.stdout)
        assert plan["local"] is False
        assert plan["srun_lines"]["benchmark"].startswith("srun --jobid=local --overlap ")
    inside = run_srtd(
        "plan", str(DEMO), "--json", cwd=tmp_path, env={"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "c[1-2]"}
    )
    assert inside.returncode == 0, inside.stderr
    plan = json.loads(inside.stdout)
    assert (plan["local"], plan["job_id"], plan["allocation"]) == (False, "77", ["c1", "c2"])
    refused = run_srtd("plan", str(DEMO), "--local", "--slurm", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (
        2,
        "srtd: --local plans for this machine; --slurm and --sbatch plan for Slurm\n",
    )


def test_a_saved_local_plan_is_copied_to_the_log_dir_byte_for_byte(tmp_path: Path) -> None:
    from srtd.unit import Plan, Unit, UnitKind

    unit = Unit(name="b", phase="bench", nodes=("node0",), argv=("true",), log="b.log", kind=UnitKind.BENCHMARK)
    plan = Plan(
        name="copy",
        job_id="c1",
        log_dir=str(tmp_path / "logs"),
        nodes={"head": ("node0",)},
        allocation=("node0",),
        phases=("bench",),
        units=(unit,),
        local=True,
        preflight=False,
    )
    compact = json.dumps(json.loads(plan.dumps()), separators=(",", ":"))  # not how srtd writes it
    saved = tmp_path / "plan.json"
    saved.write_text(compact, encoding="utf-8")
    ran = run_srtd("run", str(saved), "--local", "--plain", cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "logs" / "plan.json").read_text(encoding="utf-8") == compact
