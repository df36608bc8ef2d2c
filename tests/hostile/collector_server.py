"""A real `srtd collector` (uvicorn) for the hostile-input tests, and what they check of its answers."""

from __future__ import annotations

import resource
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.collector.helpers import Running, collector, collector_env

WRITE = f"hostile-write-{uuid.uuid4().hex}"
READ = f"hostile-read-{uuid.uuid4().hex}"
READERS = ("/", "/api/jobs")  # every job's readers; a job's own are `job_readers`


def writer(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITE}"}, timeout=30)


def job_readers(job_id: str) -> tuple[str, ...]:
    quoted = quote(job_id, safe=":/")  # as srtd's reporter writes it in a path
    return (f"/jobs/{quoted}", f"/api/jobs/{quoted}", f"/api/jobs/{quoted}/events", f"/api/srtd/jobs/{quoted}/journal")


def assert_clean(answer: httpx.Response) -> None:
    """Never a 500, never a traceback; every error a JSON body or a page."""
    assert answer.status_code < 500, (answer.status_code, answer.text[:500])
    assert "Traceback" not in answer.text
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in answer.headers["content-security-policy"]


def assert_readable(client: httpx.Client, job_id: str | None) -> None:
    """Every reader of the jobs (and of `job_id`) answers 200."""
    for path in (*READERS, *(job_readers(job_id) if job_id else ())):
        answer = client.get(path)
        assert_clean(answer)
        assert answer.status_code == 200, (path, answer.text[:500])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One collector with a write and a read token, on loopback, for a whole module."""
    db = tmp_path_factory.mktemp("collector") / "c.db"
    env = collector_env(SRTD_COLLECTOR_TOKEN=WRITE, SRTD_COLLECTOR_READ_TOKEN=READ)
    with collector(db, env=env) as running:
        yield running
    stderr = running.stderr.read_text()
    assert "Traceback" not in stderr, stderr


def few_fds(limit: int) -> None:
    """In the collector's process: a low limit on open files (a crowded server, sooner)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def db_of(running: Running) -> Path:
    return running.stderr.parent / "c.db"
