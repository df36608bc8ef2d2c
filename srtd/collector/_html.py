"""The few pages that are not templates (the login form, a missing job) and the links every page makes.

Every page with data is a template (`_templates`, autoescaped); what is built here by hand
puts every value from a request or the database through `esc`.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote


def esc(value: Any) -> str:
    return "" if value is None else escape(str(value), quote=True)


def job_href(job_id: str) -> str:
    return "/jobs/" + quote(job_id, safe=":")


def sweep_href(sweep: str) -> str:
    return "/sweeps/" + quote(sweep, safe="")


def page(title: str, body: str, *, nonce: str, feed: str | None = None, cursor: int = 0, before: str = "") -> str:
    """The whole document; `feed`: the cursor feed whose news refresh `<main>` in place.

    `nonce`: the response's CSP nonce (`_guard`); the script carries it so that it can ask
    for fragments whose styles carry the same one."""
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
