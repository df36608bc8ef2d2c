"""The collector's HTTP API: srt-slurm's status contract, its reads, and srtd's journal route.

Every error is a JSON body `{"error": ..., "detail": [...]}` with its status code; a
bug answers 500 with a one-line body, never a traceback (the traceback goes to the
collector's own log, which never holds a request header).
"""

from __future__ import annotations

import logging
import re
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from srtd.collector._auth import COOKIE, Tokens
from srtd.collector._bodies import BodyError, JobMove, JournalPost, NewJob, check_job_id, parse_json
from srtd.collector._store import FEED_LIMIT, Store
from srtd.status_api import MAX_BODY

log = logging.getLogger("srtd.collector")
BODY_SECONDS = 30  # a request body arriving slower than this is refused (408), not waited on
CURSOR = re.compile(r"[0-9]{1,18}")  # ASCII digits, within SQLite's integers
M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    def __init__(self, status: int, error: str, detail: list[Any] | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.detail = detail or []


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def require_write(request: Request) -> None:
    tokens: Tokens = request.app.state.tokens
    if not tokens.may_write(request.headers.get("authorization")):
        raise ApiError(401, "a write token is needed: Authorization: Bearer <token>")


def require_read(request: Request) -> None:
    tokens: Tokens = request.app.state.tokens
    if not tokens.may_read(request.headers.get("authorization"), request.cookies.get(COOKIE)):
        raise ApiError(401, "a read token is needed: Authorization: Bearer <token>, or log in at /login")


async def bounded_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request's body: 413 over `limit` bytes (declared or streamed), 408 when it does not
    arrive within `BODY_SECONDS`.  `_guard` reads what a refusal leaves unread."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"body over {limit} bytes")
    raw = bytearray()
    with anyio.move_on_after(BODY_SECONDS) as waited:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                raise ApiError(413, f"body over {limit} bytes")
    if waited.cancelled_caught:
        raise ApiError(408, f"the body did not arrive within {BODY_SECONDS} s")
    return bytes(raw)


async def body_of(request: Request, model: type[M]) -> M:
    """The request's JSON body as `model`: `bounded_body`'s 413 and 408, and a 422 when it is
    not the contract's or not within the collector's bounds (`_bodies`)."""
    raw = await bounded_body(request)
    try:
        data = parse_json(raw)
    except BodyError as err:
        raise ApiError(422, err.msg, [{"loc": err.loc, "msg": err.msg}] if err.loc else []) from None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        detail = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in err.errors(include_url=False, include_input=False)]
        raise ApiError(
            422, f"the body is not a valid {model.model_config.get('title') or model.__name__}", detail
        ) from None


def path_job_id(request: Request) -> str:
    """The job id of a write's path, held to the rules of a body's `job_id` (422 otherwise)."""
    job_id: str = request.path_params["job_id"]
    try:
        return check_job_id(job_id)
    except ValueError as err:
        raise ApiError(422, f"the path's job id: {err}", [{"loc": ["path", "job_id"], "msg": str(err)}]) from None


def _after(request: Request) -> int:
    text = request.query_params.get("after", "0")
    if not CURSOR.fullmatch(text):
        raise ApiError(422, f"after must be a non-negative integer below 10**18, got {text[:40]!r}")
    return int(text)


def _feed(events: list[dict[str, Any]], after: int) -> dict[str, Any]:
    """A page of a cursor feed: the events and the cursor to ask from next."""
    return {"events": events, "next": events[-1]["seq"] if events else after, "more": len(events) == FEED_LIMIT}


# ---------------------------------------------------------------------- the contract
JOURNAL_FEED = 1  # the version of srtd's journal route this collector speaks (`/api/health`)


async def health(request: Request) -> Response:
    """The contract's health answer, plus what srtd's reporter looks for: this collector takes journals."""
    return JSONResponse({"status": "ok", "srtd": {"journal": JOURNAL_FEED}})


async def post_job(request: Request) -> Response:
    require_write(request)
    body = await body_of(request, NewJob)
    created = store_of(request).record_post(body)
    return JSONResponse({"job_id": body.job_id, "created": created}, status_code=201)


async def put_job(request: Request) -> Response:
    require_write(request)
    job_id = path_job_id(request)
    body = await body_of(request, JobMove)
    placeholder = store_of(request).record_put(job_id, body)
    return JSONResponse({"job_id": job_id, "placeholder": placeholder})


# ---------------------------------------------------------------------- reads
async def list_jobs(request: Request) -> Response:
    require_read(request)
    return JSONResponse({"jobs": store_of(request).jobs()})


async def get_job(request: Request) -> Response:
    require_read(request)
    job = store_of(request).job(request.path_params["job_id"])
    if job is None:
        raise ApiError(404, f"no job {request.path_params['job_id']!r}")
    return JSONResponse(job)


async def events(request: Request) -> Response:
    require_read(request)
    after = _after(request)
    return JSONResponse(_feed(store_of(request).events(after), after))


async def job_events(request: Request) -> Response:
    require_read(request)
    after = _after(request)
    return JSONResponse(_feed(store_of(request).events(after, request.path_params["job_id"]), after))


# ---------------------------------------------------------------------- srtd's extension
async def post_journal(request: Request) -> Response:
    require_write(request)
    job_id = path_job_id(request)
    batch = await body_of(request, JournalPost)
    new = store_of(request).record_journal(job_id, [e.event() for e in batch.events])
    return JSONResponse({"recorded": new})


async def get_journal(request: Request) -> Response:
    require_read(request)
    journal = store_of(request).journal(request.path_params["job_id"])
    return JSONResponse({"events": [e.as_json() for e in journal]})


async def job_changes(request: Request) -> Response:
    """A job's revision as a cursor feed: one entry when anything of the job (status or journal)
    changed after `after`, so a job page refreshes on its units' news too (`static/live.js`)."""
    require_read(request)
    after = _after(request)
    revision = store_of(request).revision(request.path_params["job_id"])
    if revision is None:
        raise ApiError(404, f"no job {request.path_params['job_id']!r}")
    changed = [{"seq": revision}] if revision != after else []  # a database started over: news too
    return JSONResponse({"events": changed, "next": revision, "more": False})


ROUTES = [
    Route("/api/health", health, methods=["GET"]),
    Route("/api/jobs", post_job, methods=["POST"]),
    Route("/api/jobs", list_jobs, methods=["GET"]),
    Route("/api/events", events, methods=["GET"]),
    Route("/api/srtd/jobs/{job_id:path}/journal", post_journal, methods=["POST"]),
    Route("/api/srtd/jobs/{job_id:path}/journal", get_journal, methods=["GET"]),
    Route("/api/srtd/jobs/{job_id:path}/changes", job_changes, methods=["GET"]),
    Route("/api/jobs/{job_id:path}/events", job_events, methods=["GET"]),
    Route("/api/jobs/{job_id:path}", put_job, methods=["PUT"]),
    Route("/api/jobs/{job_id:path}", get_job, methods=["GET"]),
]


# ---------------------------------------------------------------------- errors as JSON
async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse({"error": exc.error, "detail": exc.detail}, status_code=exc.status, headers=headers)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail, "detail": []}, status_code=exc.status_code, headers=exc.headers)


async def internal_error(request: Request, exc: Exception) -> Response:
    # Starlette re-raises the exception after this answer goes out, and uvicorn logs its traceback.
    log.error("internal error on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    return JSONResponse({"error": "internal error in the collector", "detail": []}, status_code=500)
