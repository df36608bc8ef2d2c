"""The dashboard: the jobs table at `/`, a job's page, a sweep's page, the compare page, the login form.

Server-rendered HTML; `static/live.js` polls the cursor feed named by `<main data-feed>`
and, when something happened, fetches the same page with `X-Fragment: 1` to replace
`<main>`'s content: live updates without a reload, one rendering path.  The assets
ship inside the package (srtd/collector/static).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from srtd.collector._api import ApiError, bounded_body, require_read, store_of
from srtd.collector._auth import COOKIE, Tokens
from srtd.collector._boards import compare_view, jobs_page, sweep_view
from srtd.collector._html import esc, page
from srtd.collector._jobpage import job_view

STATIC = Path(__file__).with_name("static")


class _AnyText(Convertor[str]):
    """A path parameter that is any text, line breaks too: a sweep is a job's name, which may hold
    one, and Starlette's `path` (`.*`) stops at a newline, so its page was a 404."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("srtd_text", _AnyText())
LOGIN_BODY = 4096  # a login form's body: one token


def _read_or_login(request: Request) -> Response | None:
    try:
        require_read(request)
    except ApiError:
        form = _login_form("a read token is needed")
        return HTMLResponse(page("log in", form, nonce=request.state.nonce), status_code=401)
    return None


async def index(request: Request) -> Response:
    if (refused := _read_or_login(request)) is not None:
        return refused
    return jobs_page(request)


async def job_page(request: Request) -> Response:
    if (refused := _read_or_login(request)) is not None:
        return refused
    job_id = request.path_params["job_id"]
    job = store_of(request).job(job_id)
    if job is None:
        missing = page("no such job", f"<p>no job {esc(job_id)}</p>", nonce=request.state.nonce)
        return HTMLResponse(missing, status_code=404)
    return await job_view(request, job)


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
    Route("/sweeps/{sweep:srtd_text}", sweep_page, methods=["GET"]),
    Route("/compare", compare_page, methods=["GET"]),
    Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
]
