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
BROWSER_ONLY = [
    pytest.mark.browser,
    pytest.mark.skipif(os.environ.get("SRTD_TEST_BROWSER") != "1", reason="browser tests run in `nox -s browser`"),
]
# The head of a toy job with no fixed ports (no frontend, no tachometer), named NAME: its services follow.
TOY_JOB_HEAD = """\
schema: 2
name: NAME
model: {path: "hf:srtd/toy", container: toy, precision: bf16}
resources: {gpu_type: cpu, gpus_per_node: 1}
frontend: {type: none}
observability: {tachometer: {enabled: false}}
services:
"""


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
