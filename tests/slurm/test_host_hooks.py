"""Host hooks on the dev cluster: one step per node on the bare host, before the job's units
and after its teardown, each writing its own output file (host_setup_<node>.out,
host_teardown_<node>.out)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.slurm.conftest import CLUSTER_CONFIG, PROC, custom_job, final_job_event, journal, squeue_steps, srtd

pytestmark = pytest.mark.usefixtures("slurm")

# what a hook writes: where it ran (Slurm's node name and step) and that no container wraps it
REPORT = (
    'echo "{what} node=$SLURMD_NODENAME job=$SLURM_JOB_ID step=$SLURM_STEP_ID container=${{SLURM_CONTAINER:-none}}"'
)


def test_each_node_gets_its_setup_and_teardown_step_on_the_bare_host(
    tmp_path: Path, token: str, nothing_left: object
) -> None:
    record = tmp_path / "record"
    bench = f"{sys.executable} {PROC} --record {record} --token {token} --exit-after 2 --code 0"
    text = custom_job("hooks", token, record, benchmark=f"{{type: custom, command: {json.dumps(bench)}}}")
    hooks = {
        "nodes": "workers",
        "timeout_seconds": 60,
        "commands": [REPORT.format(what="setup"), "echo second command"],
        "teardown": [REPORT.format(what="teardown")],
    }
    recipe = tmp_path / "hooks.yaml"
    recipe.write_text(text + f"host_setup: {json.dumps(hooks)}\n")

    done = srtd("submit", str(recipe), "--cluster-config", str(CLUSTER_CONFIG), "--wait", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    job = json.loads(done.stdout.splitlines()[-1])
    job_id, log_dir = job["job_id"], Path(job["log_dir"])
    plan = json.loads((log_dir / "plan.json").read_text())
    worker_nodes = sorted({u["nodes"][0] for u in plan["units"] if u["kind"] == "worker"})
    assert len(worker_nodes) == 2

    # one output file per node and phase, written on that node by a step of this job, no container
    for node in worker_nodes:
        setup = (log_dir / f"host_setup_{node}.out").read_text().splitlines()
        assert len(setup) == 2, setup
        assert setup[0].startswith(f"setup node={node} job={job_id} step=")
        assert setup[0].endswith(" container=none")
        assert setup[1] == "second command"
        teardown = (log_dir / f"host_teardown_{node}.out").read_text().splitlines()
        assert len(teardown) == 1, teardown
        assert teardown[0].startswith(f"teardown node={node} job={job_id} step=")
    # the srun line of each: one node, that node, no container flags
    for node in worker_nodes:
        line = plan["srun_lines"][f"host_setup_{node}"]
        assert f"--nodes=1 --ntasks=1 --nodelist={node} " in line
        assert "--container" not in line

    events = journal(log_dir)
    order = [(e.get("unit"), e["state"]) for e in events]
    hosts_setup = [f"host_setup_{n}" for n in worker_nodes]
    first_other = min(
        i for i, (u, s) in enumerate(order) if s == "starting" and u is not None and not u.startswith("host_")
    )
    assert max(order.index((u, "stopped")) for u in hosts_setup) < first_other
    teardown_starts = [order.index((f"host_teardown_{n}", "starting")) for n in worker_nodes]
    last_other = max(i for i, (u, _) in enumerate(order) if u is not None and not u.startswith("host_teardown"))
    assert min(teardown_starts) > last_other
    # every host step ran as a named step of the job
    steps = {
        e["unit"]: e["detail"]["step"]
        for e in events
        if e["state"] == "starting" and e.get("unit", "").startswith("host_")
    }
    assert sorted(steps) == sorted([*hosts_setup, *(f"host_teardown_{n}" for n in worker_nodes)])
    assert all(step.startswith(job_id + ".") for step in steps.values())
    assert final_job_event(events)["state"] == "succeeded"
    nothing_left(job_id)  # type: ignore[operator]
    assert squeue_steps(job_id) == {}
