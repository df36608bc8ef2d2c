"""The dashboard's page templates: Jinja2 through Starlette, autoescaping every value.

Pages render `templates/*.html`; each extends `base.html`, which carries the page's CSP
nonce (`_guard`) on its scripts.  Values from a request or the database are escaped by
Jinja2's autoescape, so a page never escapes by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

TEMPLATES = Jinja2Templates(directory=Path(__file__).with_name("templates"))


def render(request: Request, name: str, context: dict[str, Any], *, status_code: int = 200) -> HTMLResponse:
    """`templates/<name>` for this request, with its CSP nonce in the context."""
    nonce = request.scope.get("state", {}).get("nonce", "")
    return TEMPLATES.TemplateResponse(request, name, {"nonce": nonce, **context}, status_code=status_code)
