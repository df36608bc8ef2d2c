"""Spare nodes in the plan: how many the job asks for, and what that adds to the sbatch header."""

from __future__ import annotations

from srtd.cluster import Cluster
from srtd.recipe import Recipe

# Without it Slurm revokes the whole allocation when one node fails; with it the job keeps
# its other nodes and a spare can take the lost one's place (sbatch(1)).
NO_KILL = "no-kill"


def spare_count(recipe: Recipe, cluster: Cluster) -> int:
    """`resources.spare_nodes`, else the cluster's `spare_nodes`."""
    own = recipe.resources.spare_nodes
    return cluster.spare_nodes if own is None else own


def no_kill(spares: tuple[str, ...]) -> dict[str, str]:
    """The `#SBATCH --no-kill` of a job that holds spares; nothing for one that holds none."""
    return {NO_KILL: ""} if spares else {}
