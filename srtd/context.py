"""The facts every registry row reads while the plan is built.

Engines, frontends, service kinds and benchmarks turn a recipe into units; they
all need the same things: where each node is, which container and mounts a step
gets, where logs go, what the discovery plane's address is.  `PlanContext`
computes each of those once, so no row recomputes (or disagrees about) them.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from srtd._source import source_dir
from srtd._value import value_class
from srtd.cluster import Cluster
from srtd.layout import Place, log_file
from srtd.recipe import Recipe
from srtd.topology import Endpoint, NodeMap, PortAllocator, Process
from srtd.unit import Container, PowerSampling

LOGS_IN_CONTAINER = "/logs"
MODEL_IN_CONTAINER = "/model"
_SOURCE_DIR_REF = re.compile(r"\$(?:\{SRTCTL_SOURCE_DIR\}|SRTCTL_SOURCE_DIR\b)")


def _looks_like_image(value: str) -> bool:
    return "/" in value or value.endswith(".sqsh") or ":" in value or "#" in value


@value_class(frozen=False)
class PlanContext:
    recipe: Recipe
    cluster: Cluster
    job_id: str
    local: bool
    log_dir: str
    nodes: NodeMap
    gpus_per_node: int
    addresses: dict[str, str] = field(default_factory=dict)
    shared_ports: bool = False  # every node's listeners share one port space (local, or nodes on one host)
    ports: PortAllocator = field(default_factory=PortAllocator)
    # added to every port srtd chooses (not to ports the recipe writes): two jobs on one host
    port_offset: int = 0
    endpoints: dict[str, list[Endpoint]] = field(default_factory=dict)
    processes: dict[str, list[Process]] = field(default_factory=dict)
    discovery: dict[str, str] = field(default_factory=dict)  # ETCD_ENDPOINTS, NATS_SERVER, MOONCAKE_MASTER
    # service kind -> node -> that instance's ports: what a worker finds on its own node (lmcache-server)
    node_services: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # host path -> content, written before launch
    mooncake_store: dict[str, Any] | None = None  # the Mooncake master's store_config, under each role's own
    mooncake_pool: dict[str, Any] | None = None  # TRT-LLM's pool master: its options (workers join the pool)
    power: PowerSampling | None = None  # what srtd samples from power telemetry's GPU exporters
    source_dir: str = field(default_factory=source_dir)  # `$SRTCTL_SOURCE_DIR` in the recipe's mounts
    _warned: set[str] = field(default_factory=set)
    _process_index: dict[str, tuple[list[Process], int, dict[Endpoint, list[Process]]]] = field(default_factory=dict)

    # ------------------------------------------------------------------ notes

    def warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.warnings.append(message)

    # ------------------------------------------------------------------ nodes

    def address(self, node: str) -> str:
        """What `{node_ip}` means for a node: 127.0.0.1 locally, else the resolved address or the name."""
        if self.local:
            return "127.0.0.1"
        return self.addresses.get(node, node)

    @property
    def all_processes(self) -> list[Process]:
        return [p for role in self.processes.values() for p in role]

    def processes_of(self, endpoint: Endpoint) -> list[Process]:
        """The processes of one endpoint, in node-rank order.  An index, not a scan per
        endpoint: a 1000-worker recipe would otherwise plan in quadratic time."""
        procs = self.processes.get(endpoint.role, [])
        cached = self._process_index.get(endpoint.role)
        if cached is None or cached[0] is not procs or cached[1] != len(procs):
            index: dict[Endpoint, list[Process]] = {}
            for p in procs:
                index.setdefault(p.endpoint, []).append(p)
            cached = self._process_index[endpoint.role] = (procs, len(procs), index)
        return list(cached[2].get(endpoint, ()))

    def port(self, default: int) -> int:
        """One of srtd's well-known ports (the frontend's 8000, etcd's 2379, ...) for this job."""
        return default + self.port_offset

    # ------------------------------------------------------------------ containers

    @property
    def containerized(self) -> bool:
        """Steps run inside containers: on Slurm with pyxis.  Locally everything runs on the host."""
        return not self.local and self.cluster.container_runtime == "pyxis"

    def image(self, name: str) -> str:
        """An image reference with cluster aliases resolved; an unknown alias is kept, with a warning."""
        if name in self.cluster.containers:
            return self.cluster.containers[name]
        if not _looks_like_image(name):
            self.warn(f"container alias {name!r} is not defined in the cluster settings; kept as written")
        return name

    def container(self, image: str | None, *, mounts: bool = True, remap_root: bool = False) -> Container | None:
        if not self.containerized or not image:
            return None
        return Container(image=self.image(image), mounts=self.mounts() if mounts else {}, remap_root=remap_root)

    def mounts(self) -> dict[str, str]:
        """Host path -> container path for every container of the job, in a stable order."""
        out: dict[str, str] = {self.log_dir: LOGS_IN_CONTAINER}
        model = self.model_host_path
        if model and not model.startswith("hf:"):
            out[model] = MODEL_IN_CONTAINER
        out.update(self.cluster.default_mounts)
        for host, target in self.recipe.container_mounts.items():
            out[self._expand(host)] = self._expand(target)
        for spec in self.recipe.extra_mount or ():
            host, _, target = spec.partition(":")
            out[self._expand_vars(host)] = target or host
        return out

    def _expand(self, value: str) -> str:
        return self._expand_vars(value.replace("{job_id}", self.job_id))

    def _expand_vars(self, value: str) -> str:
        """srtd's environment variables in a host path, `$SRTCTL_SOURCE_DIR` even when srtd's
        environment has none yet (`srtd plan` outside a job: srtd run sets it, docs/recipe.md)."""
        return os.path.expandvars(_SOURCE_DIR_REF.sub(lambda _: self.source_dir, value))

    # ------------------------------------------------------------------ paths

    @property
    def model_host_path(self) -> str:
        path = self.recipe.model.path
        if path in self.cluster.model_paths:
            return self.cluster.model_paths[path]
        if not path.startswith(("hf:", "/", ".", "~")) and "/" not in path:
            self.warn(f"model alias {path!r} is not defined in the cluster settings; kept as written")
        return path

    @property
    def model_path(self) -> str:
        """The model as a worker sees it: /model in a container, the host path (or hf: id) otherwise."""
        host = self.model_host_path
        if host.startswith("hf:"):
            return host[3:]
        return MODEL_IN_CONTAINER if self.containerized else host

    @property
    def logs_path(self) -> str:
        """The log directory as a step sees it."""
        return LOGS_IN_CONTAINER if self.containerized else self.log_dir

    def log(self, stem: str, place: Place) -> str:
        """A unit's log file, relative to the log directory (the cluster's `log_layout` decides where)."""
        return log_file(self.cluster.log_layout, place, f"{stem}.out")

    def job_file(self, place: Place, name: str, *, in_step: bool) -> str:
        """A file of the job under its log directory: as a step sees it (`in_step`), or on the host
        where srtd writes it before launch (`ctx.files`) and probes it."""
        root = self.logs_path if in_step else self.log_dir
        return posixpath.join(root, log_file(self.cluster.log_layout, place, name))

    # ------------------------------------------------------------------ env

    def job_env(self) -> dict[str, str]:
        """srtd's own variables in every step: where the job is and who runs it."""
        return {"SRTD_JOB_ID": self.job_id, "SRTD_LOG_DIR": self.logs_path}


def render(text: str, values: Mapping[str, object]) -> str:
    """Substitute `{name}` for known names only; other braces (JSON) stay as written."""
    for name, value in values.items():
        token = "{" + name + "}"
        if token in text:
            text = text.replace(token, str(value))
    return text
