from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.toy.harness import Toy


@pytest.fixture
async def toy(anyio_backend: str) -> AsyncIterator[Toy]:
    """Starts toy programs; afterwards kills and reaps whatever still runs, and checks it is gone."""
    launcher = Toy()
    try:
        yield launcher
    finally:
        await launcher.close()
