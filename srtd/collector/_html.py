"""The job page's HTML: small functions that escape every value they render.

The other pages are templates (`_templates`, autoescaped); the job page moves there too.
Every value from a request or the database goes through `esc`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote

from srtd.status_api import epoch


def esc(value: Any) -> str:
    return "" if value is None else escape(str(value), quote=True)


def web_link(url: str | None) -> str:
    """A link for an http(s) URL; any other text (a `javascript:` URL stored before the
    collector checked them) is shown, never made a link."""
    if not url:
        return ""
    if not url.lower().startswith(("http://", "https://")):
        return esc(url)
    return f'<a href="{esc(url)}" rel="noopener noreferrer">{esc(url)}</a>'


def job_href(job_id: str) -> str:
    return "/jobs/" + quote(job_id, safe=":")


def sweep_href(sweep: str) -> str:
    return "/sweeps/" + quote(sweep, safe="")


def when(text: str | None) -> str:
    """An ISO time as `YYYY-MM-DD HH:MM:SS` UTC, the full text in a tooltip."""
    seconds = epoch(text) if text else None
    if seconds is None:
        return ""
    shown = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f'<time datetime="{esc(text)}" title="{esc(text)}">{shown}</time>'


def seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"


def badge(status: str | None) -> str:
    return f'<span class="status status-{esc(status)}" data-status="{esc(status)}">{esc(status)}</span>'


def page(title: str, body: str, *, nonce: str, feed: str | None = None, cursor: int = 0, before: str = "") -> str:
    """The whole document; `feed`: the cursor feed whose news refresh `<main>` in place.

    `nonce`: the response's CSP nonce (`_guard`); the script carries it so that it can ask
    for fragments whose timeline styles carry the same one."""
    live = f' data-feed="{esc(feed)}" data-cursor="{cursor}"' if feed else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} · srtd collector</title>
<link rel="stylesheet" href="/static/style.css">
<script src="/static/live.js" nonce="{esc(nonce)}" defer></script>
</head><body>
<header><a class="home" href="/">srtd collector</a><h1>{esc(title)}</h1>
<span id="live" class="live" hidden>live</span></header>
{before}<main{live}>
{body}
</main></body></html>
"""


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", row_ids: Sequence[str] = ()) -> str:
    """A table whose cells are already HTML."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    lines = []
    for i, row in enumerate(rows):
        rid = f' data-job-id="{esc(row_ids[i])}"' if i < len(row_ids) else ""
        lines.append(f"<tr{rid}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    empty = f'<tr><td colspan="{len(headers)}" class="empty">nothing yet</td></tr>' if not lines else ""
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}{empty}</tbody></table>'


def facts(pairs: Iterable[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in pairs if v) + "</dl>"


def pre_json(value: Any) -> str:
    return f"<pre>{esc(json.dumps(value, indent=2, sort_keys=True))}</pre>"
