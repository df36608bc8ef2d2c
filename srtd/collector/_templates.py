"""The dashboard's page templates: Jinja2 through Starlette, autoescaping every value.

Pages render `templates/*.html`; each extends `base.html`, which carries the page's CSP
nonce (`_guard`) on its scripts.  Values from a request or the database are escaped by
Jinja2's autoescape, so a page never escapes by hand.  A request with `X-Fragment: 1`
(`static/live.js` refreshing a page in place) gets the page's `main` block alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from srtd.collector._compare import rounded
from srtd.collector._html import job_href, sweep_href
from srtd.status_api import epoch

TEMPLATES = Jinja2Templates(directory=Path(__file__).with_name("templates"))


def shown_time(text: str | None) -> str:
    """An ISO time as `YYYY-MM-DD HH:MM:SS` UTC; nothing for a missing or unreadable one."""
    seconds = epoch(text) if text else None
    return "" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def web_url(text: object) -> bool:
    """An http(s) URL, which a page may make a link (a stored `javascript:` URL is shown as text)."""
    return isinstance(text, str) and text.lower().startswith(("http://", "https://"))


TEMPLATES.env.filters.update(job_href=job_href, sweep_href=sweep_href, shown_time=shown_time, rounded=rounded)
TEMPLATES.env.tests["web_url"] = web_url


def render(request: Request, name: str, context: dict[str, Any], *, status_code: int = 200) -> HTMLResponse:
    """`templates/<name>` for this request, with its CSP nonce in the context; its `main` block
    alone for a fragment request."""
    nonce = request.scope.get("state", {}).get("nonce", "")
    values = {"nonce": nonce, **context}
    if request.headers.get("x-fragment") == "1":
        template = TEMPLATES.get_template(name)
        body = "".join(template.blocks["main"](template.new_context({"request": request, **values})))
        return HTMLResponse(body, status_code=status_code)
    return TEMPLATES.TemplateResponse(request, name, values, status_code=status_code)
