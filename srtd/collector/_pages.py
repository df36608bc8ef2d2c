"""The dashboard: the jobs table at `/`, a job's page, a sweep's page, the compare page, the login form.

Server-rendered HTML; `static/live.js` polls the cursor feed named by `<main data-feed>`
and, when something happened, fetches the same page with `X-Fragment: 1` to replace
`<main>`'s content: live updates without a reload, one rendering path.  The assets
ship inside the package (srtd/collector/static).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from srtd.collector._api import ApiError, bounded_body, require_read, store_of
from srtd.collector._auth import COOKIE, Tokens
from srtd.collector._boards import compare_view, jobs_page, sweep_view
from srtd.collector._html import (
    badge,
    esc,
    facts,
    page,
    pre_json,
    seconds,
    sweep_href,
    table,
    web_link,
    when,
)
from srtd.collector._journal_html import RENDERS, render_in_thread
from srtd.collector._views import sweep_of, time_to_ready, user_of, variant_of

STATIC = Path(__file__).with_name("static")
LOGIN_BODY = 4096  # a login form's body: one token


def _fragment(request: Request, title: str, body: str, **live: Any) -> Response:
    if request.headers.get("x-fragment") == "1":
        return HTMLResponse(body)
    return HTMLResponse(page(title, body, nonce=request.state.nonce, **live))


def _read_or_login(request: Request) -> Response | None:
    try:
        require_read(request)
    except ApiError:
        form = _login_form("a read token is needed")
        return HTMLResponse(page("log in", form, nonce=request.state.nonce), status_code=401)
    return None


def _renders(request: Request) -> anyio.CapacityLimiter:
    """The app's limit on journal sections drawn at once (made in the app's own event loop)."""
    state = request.app.state
    if getattr(state, "renders", None) is None:
        state.renders = anyio.CapacityLimiter(RENDERS)
    limiter: anyio.CapacityLimiter = state.renders
    return limiter


async def index(request: Request) -> Response:
    if (refused := _read_or_login(request)) is not None:
        return refused
    return jobs_page(request)


async def job_page(request: Request) -> Response:
    if (refused := _read_or_login(request)) is not None:
        return refused
    store = store_of(request)
    job_id = request.path_params["job_id"]
    job = store.job(job_id)
    if job is None:
        missing = page("no such job", f"<p>no job {esc(job_id)}</p>", nonce=request.state.nonce)
        return HTMLResponse(missing, status_code=404)
    events = store.events(0, job_id, limit=10_000)
    section, ready = await render_in_thread(store.journal_lines(job_id), request.state.nonce, _renders(request))
    sweep = sweep_of(job)
    about = facts(
        [
            ("name", esc(job.get("job_name"))),
            ("status", badge(job["status"])),
            ("stage", esc(job.get("stage"))),
            ("message", esc(job.get("message"))),
            ("sweep", f'<a href="{esc(sweep_href(sweep))}">{esc(sweep)}</a>' if sweep else ""),
            ("variant", esc(variant_of(job))),
            ("user", esc(user_of(job))),
            ("cluster", esc(job.get("cluster"))),
            ("recipe", esc(job.get("recipe"))),
            ("submitted", when(job.get("submitted_at"))),
            ("started", when(job.get("started_at"))),
            ("completed", when(job.get("completed_at"))),
            ("exit code", esc(job.get("exit_code"))),
            ("time to ready", seconds(time_to_ready(job, events, ready))),
            ("logs", web_link(job.get("logs_url"))),
            ("placeholder", "yes: updates arrived for a job never submitted here" if job["placeholder"] else ""),
        ]
    )
    history = table(
        ["#", "at", "status", "stage", "message"],
        [[esc(e["seq"]), when(e["at"]), badge(e["status"]), esc(e["stage"]), esc(e["message"])] for e in events],
        cls="history",
    )
    body = f"{about}<h2>stage history</h2>{history}{section}"
    if job.get("benchmark_results") is not None:
        body += f"<h2>benchmark results</h2>{pre_json(job['benchmark_results'])}"
    body += f"<h2>metadata</h2>{pre_json(job['metadata'])}"
    if job.get("artifacts"):
        body += f"<h2>artifacts</h2>{pre_json(job['artifacts'])}"
    cursor = events[-1]["seq"] if events else 0
    return _fragment(request, f"job {job_id}", body, feed=f"/api/jobs/{job_id}/events", cursor=cursor)


async def sweep_page(request: Request) -> Response:
    if (refused := _read_or_login(request)) is not None:
        return refused
    return sweep_view(request)


async def compare_page(request: Request) -> Response:
    if (refused := _read_or_login(request)) is not None:
        return refused
    return compare_view(request)


def _login_form(why: str = "") -> str:
    note = f'<p class="why">{esc(why)}</p>' if why else ""
    return (
        f'{note}<form class="login" method="post" action="/login">'
        '<label>token <input type="password" name="token" autocomplete="current-password" autofocus></label>'
        '<button type="submit">log in</button></form>'
    )


async def login(request: Request) -> Response:
    if request.method == "GET":
        return HTMLResponse(page("log in", _login_form(), nonce=request.state.nonce))
    raw = (await bounded_body(request, LOGIN_BODY)).decode("utf-8", "replace")
    offered = (parse_qs(raw).get("token") or [""])[0]
    tokens: Tokens = request.app.state.tokens
    session = tokens.login(offered)
    if session is None:
        refused = page("log in", _login_form("that token is not this collector's"), nonce=request.state.nonce)
        return HTMLResponse(refused, status_code=401)
    answer = RedirectResponse("/", status_code=303)
    answer.set_cookie(COOKIE, session, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return answer


ROUTES: list[BaseRoute] = [
    Route("/", index, methods=["GET"]),
    Route("/login", login, methods=["GET", "POST"]),
    Route("/jobs/{job_id:path}", job_page, methods=["GET"]),
    Route("/sweeps/{sweep:path}", sweep_page, methods=["GET"]),
    Route("/compare", compare_page, methods=["GET"]),
    Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
]
