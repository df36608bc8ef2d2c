from __future__ import annotations

import pytest

from tests.dynamo.stack import Stack, prepared_stack


@pytest.fixture(scope="session")
def stack() -> Stack:
    return prepared_stack()
