"""structlog, imported when a line is first written, and without rich, greenlet and (but on
Windows) colorama.

Whenever rich is installed, importing structlog imports rich (its console, its traceback
renderer and pretty printer, and pygments with them: tens of milliseconds and megabytes)
for its default exception formatter.  srtd's console lines carry no tracebacks, so
structlog is imported here with `rich` refused: `structlog.dev` then falls back to its
plain traceback formatter, and rich is loaded only where a terminal view is drawn.  The
refusal lasts only while structlog is imported: a later `import rich` works.

structlog itself (about 17 ms) is imported on first use, not with the modules that log: a
job's supervisor starts its units before it writes its first line (the console holds the
starting units' lines, srtd/supervisor/_console.py), so its launches do not wait for it.

- `get_logger(name)`: a module's logger, as `structlog.get_logger(name)`, that imports
  structlog when it first logs;
- `from srtd._structlog import structlog`: structlog itself, imported then.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    import structlog

# structlog asks for rich (and its traceback renderer, pretty printer) in `try` blocks: each
# refused, it does without rich.  colorama it needs only on Windows (elsewhere it writes the
# same ANSI codes itself): refused, it is half a MiB and 10 ms less on every start.  greenlet
# (installed beside Playwright, SQLAlchemy, ...) only backs its deprecated thread-local
# context, which srtd does not use: 1.2 MiB.
_REFUSED = ("rich", "rich.pretty", "rich.traceback", "greenlet") + (() if sys.platform == "win32" else ("colorama",))


def load() -> ModuleType:
    """structlog, imported (once) with `_REFUSED` hidden from it."""
    loaded = sys.modules.get("structlog")
    if loaded is not None:  # imported before: as it was
        return loaded
    hidden = [name for name in _REFUSED if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # importing it raises ImportError
    try:
        import structlog
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return structlog


class _Logger:
    """`structlog.get_logger(name)`, made when it first logs (so it follows structlog's
    configuration at that moment, as structlog's own lazy proxy does)."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            self._logger = load().get_logger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> Any:
    return _Logger(name)


def __getattr__(name: str) -> Any:
    if name == "structlog":
        return load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["get_logger", "load", "structlog"]
