"""What the browser tests share: a collector with both tokens, and Debian's chromium logged in to it.

Each test module gets its own collector and browser (module scope).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.collector.helpers import Running, collector, collector_env

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
POISON = '<script>window.__pwned = 1</script>"\'<img src=x onerror="window.__pwned = 2">é✓'
WRITE, READ = f"browser-write-{uuid.uuid4().hex}", f"browser-read-{uuid.uuid4().hex}"


def screenshots() -> Path:
    where = Path(os.environ.get("SRTD_SCREENSHOTS") or tempfile.mkdtemp(prefix="srtd-screens-"))
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    db = tmp_path_factory.mktemp("collector") / "c.db"
    with collector(db, None, collector_env(SRTD_COLLECTOR_TOKEN=WRITE, SRTD_COLLECTOR_READ_TOKEN=READ)) as running:
        yield running


@pytest.fixture(scope="module")
def browser_page(served: Running) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="srtd-chromium-") as profile:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport={"width": 1400, "height": 900}
        )
        try:
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(served.url + "/")  # a read token is set: the login form first
            page.fill("input[name=token]", READ)
            page.click("button[type=submit]")
            page.wait_for_url(served.url + "/")
            yield page
        finally:
            context.close()
