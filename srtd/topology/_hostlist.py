"""Node lists: `--nodes 'gpu-[01-08]'`, or the ones Slurm hands the batch script."""

from __future__ import annotations

import os
from collections.abc import Mapping

import hostlist

from srtd.errors import UsageError


def expand(text: str, *, what: str = "--nodes") -> list[str]:
    try:
        nodes: list[str] = hostlist.expand_hostlist(text.strip())
    except hostlist.BadHostlist as err:
        raise UsageError(f"{what}: not a host list: {text!r} ({err})") from None
    if not nodes:
        raise UsageError(f"{what}: the host list {text!r} names no node")
    return nodes


def slurm_nodes(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The allocation's nodes from Slurm's environment, heterogeneous jobs' groups in order."""
    env = os.environ if env is None else env
    groups = int(env.get("SLURM_HET_SIZE", "0") or 0)
    if groups >= 2:
        nodes: list[str] = []
        for i in range(groups):
            name = f"SLURM_JOB_NODELIST_HET_GROUP_{i}"
            if name not in env:
                raise UsageError(f"SLURM_HET_SIZE is {groups} but {name} is not set")
            nodes += expand(env[name], what=name)
        return nodes
    for name in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if env.get(name):
            return expand(env[name], what=name)
    return None
