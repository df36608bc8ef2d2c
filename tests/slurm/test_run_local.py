"""Inside an allocation `srtd run` launches steps (`--local` keeps everything on the node); values reach them intact."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import (
    CLUSTER_CONFIG,
    custom_job,
    final_job_event,
    job_state,
    journal,
    plan_job,
    run_script,
    sbatch,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("slurm")


@pytest.mark.parametrize("local", [False, True])
def test_run_in_an_allocation_uses_steps_unless_local(
    local: bool, tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    record = tmp_path / "record"
    recipe = tmp_path / "r.yaml"
    bench = f"{sys.executable} -c 'import os; print(os.environ.get(\\\"SLURM_STEP_ID\\\"))'"
    recipe.write_text(custom_job("runlocal", token, record, benchmark=f'{{type: custom, command: "{bench}"}}'))
    flag = " --local" if local else ""
    script = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --nodelist=node[1-2]\n"
        f"exec {sys.executable} -m srtd run {recipe}{flag} --cluster-config {CLUSTER_CONFIG}"
        f" --log-dir {tmp_path}/logs\n"
    )
    job = sbatch(script, tmp_path)
    wait_for(f"job {job} to end", lambda: job_state(job).get("JobState") not in ("RUNNING", "PENDING", "COMPLETING"))
    log_dir = tmp_path / "logs"
    assert final_job_event(journal(log_dir))["exit_code"] == 0
    plan = json.loads((log_dir / "plan.json").read_text())
    starts = {p.name: json.loads(p.read_text()) for p in record.glob("*.start")}
    assert plan["local"] is local
    if local:
        assert "srun_lines" not in plan
        assert all(s["step_name"] != name.removesuffix(".0.start") for name, s in starts.items())
        assert (log_dir / "benchmark.out").read_text().strip() == "None"  # not a step
    else:
        assert set(plan["srun_lines"]) == {u["name"] for u in plan["units"]}
        assert all(s["step_name"] == name.removesuffix(".0.start") for name, s in starts.items())
        assert (log_dir / "benchmark.out").read_text().strip().isdigit()
    nothing_left(job)


HOSTILE = "$(touch {canary}) `touch {canary}` 'single' \"double\" two  spaces\nsecond line; touch {canary} #"


def test_hostile_values_reach_a_step_exactly_through_real_srun(
    tmp_path: Path, token: str, nothing_left: Callable[[str], None]
) -> None:
    canary = tmp_path / "pwned"
    value = HOSTILE.replace("{canary}", str(canary))

    def hostile(plan: dict[str, Any]) -> None:
        for unit in plan["units"]:
            if unit["name"] == "service_registry":
                unit["env"] = {**unit["env"], "H_VALUE": value, "H_EMPTY": ""}
                unit["argv"] = [*unit["argv"], value, f"--x={value}"]

    record = tmp_path / "record"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(custom_job("hostile", token, record, benchmark="{type: custom, command: 'true'}"))
    plan = plan_job(recipe, tmp_path, "node[1-2]", tmp_path / "logs", hostile)
    job = sbatch(run_script(plan, 2), tmp_path, "--nodelist=node[1-2]")
    wait_for(f"job {job} to end", lambda: job_state(job).get("JobState") not in ("RUNNING", "PENDING", "COMPLETING"))
    assert final_job_event(journal(tmp_path / "logs"))["exit_code"] == 0
    got = json.loads((record / "service_registry.0.start").read_text())
    assert got["step_name"] == "service_registry"
    assert got["env"] == {"H_VALUE": value, "H_EMPTY": ""}
    assert got["argv"][-2:] == [value, f"--x={value}"]
    assert not canary.exists()
    nothing_left(job)


def test_addresses_are_slurms_node_addr_and_nodes_on_one_host_share_ports() -> None:
    from srtd.launch import slurm_addresses

    addresses, shared = slurm_addresses(["node1", "node2", "node3"])
    assert addresses == {"node1": "127.0.0.2", "node2": "127.0.0.3", "node3": "127.0.0.4"}
    assert shared  # one NodeHostName
