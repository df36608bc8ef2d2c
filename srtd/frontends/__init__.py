"""Frontends: the job's HTTP entry point and its readiness gate.  One registry row per type."""

from srtd.frontends import _frontends  # noqa: F401 - the row module registers on import
from srtd.frontends._base import Frontend, FrontendPlan, frontend_names, get_frontend, register_frontend

__all__ = ["Frontend", "FrontendPlan", "frontend_names", "get_frontend", "register_frontend"]
