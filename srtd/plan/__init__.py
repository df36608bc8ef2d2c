"""The Plan: recipe + cluster settings + nodes -> every unit of the job, offline.

    plan = build_plan(load_recipe("dsr1.yaml"), load_cluster()[0], nodes=["gpu-01", "gpu-02"])
    print(plan.dumps())            # the documented JSON contract (docs/plan.md)

`build_plan` is pure: no network, no Slurm, no clock; the same inputs give the
same bytes.
"""

from srtd.plan._builder import build_plan, check_recipe, gpus_per_node, role_shape
from srtd.plan._graph import PHASES
from srtd.plan._render import dot, mermaid, sbatch_script

__all__ = ["PHASES", "build_plan", "check_recipe", "dot", "gpus_per_node", "mermaid", "role_shape", "sbatch_script"]
