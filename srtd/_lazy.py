"""Package faces that import their private modules on first use (PEP 562).

A package lists `public name -> module` (or `-> (module, name there)`) and sets
`__getattr__ = lazy_attributes(__name__, table)`: `srtd run` then loads only the
modules the run touches, not every launcher, reader and renderer a package offers.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, table: Mapping[str, str | tuple[str, str]]) -> Callable[[str], Any]:
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (where, name) if isinstance(where, str) else where
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute)
        namespace[name] = value  # the next lookup is a plain global
        return value

    return __getattr__
