"""`srtd-toy-gpus`: answers nvidia-smi's two preflight queries with GPUs and processes of a file.

Tests and machines without GPUs set the cluster setting `gpu_query_command: srtd-toy-gpus
--config FILE` (docs/nodes.md).  FILE is JSON:

    {"gpus": 4, "total_mib": 81559, "free_mib": 81000,
     "nodes": {"node2": {"free_mib": 2000, "apps": [{"gpu": 1, "pid": 4242, "used_mib": 30000}]}}}

`gpus`, `total_mib`, `free_mib` and `apps` hold for every node; an entry under `nodes` (the
node's name as `$SRTD_NODE`, `$SLURMD_NODENAME` or the host name says) replaces them for that
node.  Printed as `nvidia-smi --format=csv,noheader,nounits` does: one line a GPU
(`index, uuid, memory.total, memory.free`) or a process (`gpu_uuid, pid, used_memory`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any


def _node() -> str:
    return os.environ.get("SRTD_NODE") or os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _facts(config: dict[str, Any], node: str) -> dict[str, Any]:
    facts = {key: value for key, value in config.items() if key != "nodes"}
    facts.update((config.get("nodes") or {}).get(node, {}))
    return facts


def _uuid(node: str, index: int) -> str:
    return f"GPU-toy-{node}-{index}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="srtd-toy-gpus", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="JSON file of the fake GPUs; none: 4 idle GPUs of 80 GiB")
    parser.add_argument("--query-gpu", help="as nvidia-smi: index,uuid,memory.total,memory.free")
    parser.add_argument("--query-compute-apps", help="as nvidia-smi: gpu_uuid,pid,used_memory")
    parser.add_argument("--format", default="csv,noheader,nounits")
    args = parser.parse_args(argv)
    config: dict[str, Any] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as file:
            config = json.load(file)
    node = _node()
    facts = _facts(config, node)
    if facts.get("fail"):  # a node whose driver does not answer
        print(f"toy: {facts['fail']}", file=sys.stderr)
        raise SystemExit(9)
    count, total, free = (
        int(facts.get("gpus", 4)),
        int(facts.get("total_mib", 81559)),
        int(facts.get("free_mib", 81000)),
    )
    if args.query_gpu:
        for index in range(count):
            print(f"{index}, {_uuid(node, index)}, {total}, {free}")
    if args.query_compute_apps:
        for app in facts.get("apps", []):
            print(f"{_uuid(node, int(app['gpu']))}, {int(app['pid'])}, {int(app['used_mib'])}")


if __name__ == "__main__":
    main()
