"""Imports every command module so each registers itself on the group."""

from srtd.cli import _plan, _run, _schema, _validate

__all__ = ["_plan", "_run", "_schema", "_validate"]
