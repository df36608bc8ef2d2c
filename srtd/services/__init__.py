"""Services: everything that is not a worker or the frontend.  One registry row per kind."""

from srtd.services import _builtin, _gms, _mooncake  # noqa: F401 - the row modules register on import
from srtd.services._builtin import LMCACHE_RPC_PORT, LMCACHE_SERVER
from srtd.services._gms import gms_socket_dir
from srtd.services._kind import Instance, ServiceKind, get_kind, kind_names, register_service
from srtd.services._mooncake import pool_run_dir, pool_timeout_env
from srtd.services._resolve import (
    EffectiveService,
    ImpliesServices,
    effective_services,
    service_problems,
    services_client_env,
)
from srtd.services._units import instances, placed_nodes, readiness_of, service_ports, service_units

__all__ = [
    "LMCACHE_RPC_PORT",
    "LMCACHE_SERVER",
    "EffectiveService",
    "ImpliesServices",
    "Instance",
    "ServiceKind",
    "effective_services",
    "get_kind",
    "gms_socket_dir",
    "instances",
    "kind_names",
    "placed_nodes",
    "pool_run_dir",
    "pool_timeout_env",
    "readiness_of",
    "register_service",
    "service_ports",
    "service_problems",
    "service_units",
    "services_client_env",
]
