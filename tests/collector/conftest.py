from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from srtd.collector import Store, Tokens, create_app, open_db
from srtd.collector._pages import ROUTES

WRITE = "write-token-for-tests"
READ = "read-token-for-tests"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(open_db(tmp_path / "collector.db"), clock=Clock())


def client_for(store: Store, tokens: Tokens, token: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=create_app(store, tokens, ROUTES))
    return httpx.AsyncClient(transport=transport, base_url="http://collector", headers=headers)


@pytest.fixture
async def api(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    """A client with the write token, of a collector with both tokens."""
    async with client_for(store, Tokens(write=WRITE, read=READ), WRITE) as client:
        yield client


@pytest.fixture
async def anonymous(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(store, Tokens(write=WRITE, read=READ), None) as client:
        yield client
