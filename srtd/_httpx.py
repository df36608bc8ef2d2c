"""httpx, imported without its command line: click, rich and pygments (about 4 MiB).

`import httpx` imports `httpx._main`, the `httpx` command's module, whenever click, rich and
pygments are installed, as they are beside srtd.  The supervisor imports httpx for its HTTP
probes and status reporting, and would hold all three for the job's whole life; so httpx is
imported here with `httpx._main` refused: httpx then leaves its command out, as it does when
its `cli` extra is missing.  The refusal lasts only while httpx is imported: a later
`import httpx._main` works.  When something imported httpx before, this changes nothing.

Every srtd module that runs with httpx takes it from here (`from srtd._httpx import httpx`).
"""

from __future__ import annotations

import sys

_REFUSED = "httpx._main"
_HIDE = "httpx" not in sys.modules and _REFUSED not in sys.modules
if _HIDE:
    sys.modules[_REFUSED] = None  # type: ignore[assignment]  # importing it raises ImportError
try:
    import httpx
finally:
    if _HIDE and sys.modules.get(_REFUSED, False) is None:
        del sys.modules[_REFUSED]

__all__ = ["httpx"]
