"""`srtd collector`: a status collector for srt-slurm's contract, with a web dashboard.

Public surface:

- `create_app(store, tokens)`: the ASGI app (Starlette): the contract's routes
  (`POST /api/jobs`, `PUT /api/jobs/{id}`, `GET /api/health`), the reads and cursor
  feeds, srtd's journal route, and the dashboard pages.
- `Store`, `open_db(path)`: the SQLite store (WAL, schema migrated on open).
- `Tokens`: the write and read tokens, from the environment.
- `serve(db, host, port, tokens)`: run it under uvicorn.

Needs the `collector` extra (starlette, uvicorn); no other command imports this package.
"""

from srtd.collector._app import create_app, open_store, serve
from srtd.collector._auth import READ_TOKEN_ENV, WRITE_TOKEN_ENV, Tokens, check_bind
from srtd.collector._demo import fill as fill_demo
from srtd.collector._pages import ROUTES as PAGE_ROUTES
from srtd.collector._store import SCHEMA_VERSION, Store, open_db

__all__ = [
    "PAGE_ROUTES",
    "READ_TOKEN_ENV",
    "SCHEMA_VERSION",
    "WRITE_TOKEN_ENV",
    "Store",
    "Tokens",
    "check_bind",
    "create_app",
    "fill_demo",
    "open_db",
    "open_store",
    "serve",
]
