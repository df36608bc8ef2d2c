"""What Slurm says about the allocation's nodes: addresses (for probes) and slurmd ports (for the presence check)."""

from __future__ import annotations

from collections.abc import Sequence

from srtd.errors import LaunchError
from srtd.launch._tool import run_slurm_tool


def parse_nodes(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show node --oneliner` output: node name -> its `Key=Value` fields."""
    nodes: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        fields: dict[str, str] = {}
        for word in line.split():
            key, sep, value = word.partition("=")
            if sep:
                fields[key] = value
        name = fields.get("NodeName")
        if name:
            nodes[name] = fields
    return nodes


def show_nodes(nodes: Sequence[str], scontrol: str = "scontrol") -> dict[str, dict[str, str]]:
    """`scontrol show node` of `nodes` in one call: node name -> its fields."""
    done = run_slurm_tool([scontrol, "--oneliner", "show", "node", ",".join(nodes)])
    if done.code is None:
        raise LaunchError(f"cannot ask Slurm for the nodes' addresses: {done.said()}")
    if not done.ok:
        raise LaunchError(f"scontrol show node failed: {done.said()}")
    return parse_nodes(done.out)


def slurm_addresses(nodes: Sequence[str], scontrol: str = "scontrol") -> tuple[dict[str, str], bool]:
    """Each node's address as Slurm knows it (NodeAddr), and whether two nodes share a host.

    One `scontrol show node` for the whole allocation.  Nodes on one host (the same
    NodeHostName or the same address) share a port space for wildcard binds.
    """
    if not nodes:
        return {}, False
    found = show_nodes(nodes, scontrol)
    addresses: dict[str, str] = {}
    hosts: list[str] = []
    for node in nodes:
        fields = found.get(node, {})
        addresses[node] = fields.get("NodeAddr") or node
        hosts.append(fields.get("NodeHostName") or addresses[node])
    shared = len(set(hosts)) < len(hosts) or len(set(addresses.values())) < len(addresses)
    return addresses, shared


SLURMD_PORT = 6818  # Slurm's default SlurmdPort


def slurmd_targets(nodes: Sequence[str], scontrol: str = "scontrol") -> dict[str, tuple[str, int]]:
    """Where each node's slurmd listens (NodeAddr, Port): what the presence check connects to."""
    if not nodes:
        return {}
    targets: dict[str, tuple[str, int]] = {}
    for node, fields in show_nodes(nodes, scontrol).items():
        port = fields.get("Port", "")
        targets[node] = (fields.get("NodeAddr") or node, int(port) if port.isdigit() else SLURMD_PORT)
    return {n: targets[n] for n in nodes if n in targets}
