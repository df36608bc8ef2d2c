"""structlog, imported without rich's traceback renderer.

Whenever rich is installed, importing structlog imports rich's traceback renderer and
pretty printer, and pygments with them (about 11 MiB and tens of milliseconds), for its
default exception formatter.  srtd's console lines carry no tracebacks, so structlog
is imported here with those two modules of rich refused: `structlog.dev` then falls back
to its plain traceback formatter, and rich is loaded only where a terminal view is drawn.

Every srtd module takes structlog from here (`from srtd._structlog import structlog`);
when something imported structlog before, this changes nothing.
"""

from __future__ import annotations

import sys

# structlog asks for these two in `try` blocks: each refused, it does without rich
_HIDDEN = [name for name in ("rich.pretty", "rich.traceback") if name not in sys.modules]
if "structlog" in sys.modules:
    _HIDDEN = []
for _name in _HIDDEN:
    sys.modules[_name] = None  # type: ignore[assignment]  # importing it raises ImportError
try:
    import structlog
finally:
    for _name in _HIDDEN:
        if sys.modules.get(_name, False) is None:
            del sys.modules[_name]

__all__ = ["structlog"]
