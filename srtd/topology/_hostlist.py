"""Node lists: `--nodes 'gpu-[01-08]'`, or the ones Slurm hands the batch script."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import hostlist

from srtd.errors import UsageError

# A host name (RFC 1123): dot-separated labels of letters, digits and inner hyphens, at
# most 63 characters each and 253 in all; Slurm's node names may hold `_` too.  Node
# names reach srun's --nodelist, ssh-free probes and file names: nothing else may pass.
_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
MAX_HOST_NAME = 253


def expand(text: str, *, what: str = "--nodes") -> list[str]:
    try:
        nodes: list[str] = hostlist.expand_hostlist(text.strip())
    except hostlist.BadHostlist as err:
        raise UsageError(f"{what}: not a host list: {text!r} ({err})") from None
    if not nodes:
        raise UsageError(f"{what}: the host list {text!r} names no node")
    for number, node in enumerate(nodes, start=1):
        if not is_host_name(node):
            raise UsageError(
                f"{what}: node {number} of the list, {node!r}, is not a host name "
                "(labels of letters, digits, `-` and `_`, joined by `.`)"
            )
    return nodes


def is_host_name(name: str) -> bool:
    return len(name) <= MAX_HOST_NAME and all(_LABEL.fullmatch(label) for label in name.split("."))


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
