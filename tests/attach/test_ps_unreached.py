"""`srtd ps` when Slurm's tools are there but answer nothing (slurmctld down): this node's jobs are
still listed, then one line says why the cluster's are not, and the exit code is Slurm's (3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from srtd.errors import EXIT_LAUNCH
from tests.attach.helpers import JobProcess
from tests.command import run_srtd
from tests.supervisor.helpers import PlanMaker

pytestmark = pytest.mark.slow

DOWN = "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n"


def test_ps_lists_this_node_s_jobs_and_says_squeue_failed(maker: PlanMaker, runtime: Path, tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "squeue").write_text(DOWN)
    (tools / "squeue").chmod(0o755)
    path = f"{tools}:{os.environ['PATH']}"
    maker.unit("worker")
    job = JobProcess.of_plan(maker.plan(hold=True), maker.root)
    try:
        job.socket()
        job.running()
        listed = run_srtd("ps", "--json", env={"PATH": path})
        table = run_srtd("ps", env={"PATH": path})
    finally:
        job.kill()
    said = (
        "srtd: squeue failed: slurm_load_jobs error: Unable to contact slurm controller (connect failure);"
        " listed this node's jobs only\n"
    )
    assert (listed.returncode, listed.stderr) == (EXIT_LAUNCH, said)
    assert [json.loads(line)["job_id"] for line in listed.stdout.splitlines()] == ["local-1"]
    assert (table.returncode, table.stderr) == (EXIT_LAUNCH, said)
    assert "local-1" in table.stdout
