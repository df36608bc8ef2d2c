from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# Hypothesis profiles: the default run keeps the property suites (tests/hostile, ...) to a
# few hundred examples; `pytest --hypothesis-profile=thorough` runs many more.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "srtd", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("srtd")
