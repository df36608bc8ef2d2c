"""Imports every command module so each registers itself on the group."""

from srtd.cli import _migrate, _plan, _run, _schema, _validate

__all__ = ["_migrate", "_plan", "_run", "_schema", "_validate"]
