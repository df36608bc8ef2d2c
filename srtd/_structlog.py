"""structlog, imported without rich, greenlet and (but on Windows) colorama.

Whenever rich is installed, importing structlog imports rich (its console, its traceback
renderer and pretty printer, and pygments with them: tens of milliseconds and megabytes)
for its default exception formatter.  srtd's console lines carry no tracebacks, so
structlog is imported here with `rich` refused: `structlog.dev` then falls back to its
plain traceback formatter, and rich is loaded only where a terminal view is drawn.  The
refusal lasts only while structlog is imported: a later `import rich` works.

Every srtd module takes structlog from here (`from srtd._structlog import structlog`);
when something imported structlog before, this changes nothing, and when rich is already
imported only its traceback renderer and pretty printer are refused.
"""

from __future__ import annotations

import sys

# structlog asks for rich (and its traceback renderer, pretty printer) in `try` blocks: each
# refused, it does without rich.  colorama it needs only on Windows (elsewhere it writes the
# same ANSI codes itself): refused, it is half a MiB and 10 ms less on every start.  greenlet
# (installed beside Playwright, SQLAlchemy, ...) only backs its deprecated thread-local
# context, which srtd does not use: 1.2 MiB.
_REFUSED = ("rich", "rich.pretty", "rich.traceback", "greenlet") + (() if sys.platform == "win32" else ("colorama",))
_HIDDEN = [name for name in _REFUSED if name not in sys.modules]
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
