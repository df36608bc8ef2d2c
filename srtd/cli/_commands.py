"""Imports every command module so each registers itself on the group."""

from srtd.cli import (
    _attach,
    _collector,
    _migrate,
    _plan,
    _results,
    _run,
    _schema,
    _submit,
    _sweep,
    _timeline,
    _validate,
)

__all__ = [
    "_attach",
    "_collector",
    "_migrate",
    "_plan",
    "_results",
    "_run",
    "_schema",
    "_submit",
    "_sweep",
    "_timeline",
    "_validate",
]
