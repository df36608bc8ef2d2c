"""The collector's store: one SQLite file in WAL mode, its schema versioned and migrated on open.

Every write is one short transaction committed before the answer goes out, in WAL
mode with `synchronous=NORMAL`: what a reporter was told is recorded survives the
collector being killed or restarted (the commit is in the WAL file before the answer);
only the last commits before a power cut or a kernel crash can be lost, the price of
not waiting for an fsync per request, which under the disk traffic of the jobs
themselves stalls every request for tens of milliseconds.  The calls are made on the
event loop itself: each is a few hundred microseconds against a local file, one
writer at a time, which is cheaper than handing them to a thread and back
(docs/collector.md, why SQLite; perf/ measures it).

The merge rules of the contract live here (`record_post`, `record_put`); an event is
recorded whenever a job's (status, stage, message) changes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from srtd.events import Event, JobState
from srtd.status_api import JobCreate, JobUpdate, Status

# Each entry moves the schema one version up; `PRAGMA user_version` says where a file is.
MIGRATIONS: tuple[str, ...] = (
    # 1: jobs and their (status, stage, message) history
    """
    CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        job_name TEXT,
        cluster TEXT,
        recipe TEXT,
        submitted_at TEXT,
        status TEXT NOT NULL,
        stage TEXT,
        message TEXT,
        started_at TEXT,
        completed_at TEXT,
        exit_code INTEGER,
        logs_url TEXT,
        benchmark_results TEXT,
        artifacts TEXT NOT NULL DEFAULT '{}',
        metadata TEXT NOT NULL DEFAULT '{}',
        placeholder INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at TEXT,
        changed REAL NOT NULL
    );
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs(job_id),
        at TEXT,
        received REAL NOT NULL,
        status TEXT NOT NULL,
        stage TEXT,
        message TEXT
    );
    CREATE INDEX events_by_job ON events(job_id, seq);
    """,
    # 2: srtd's extension: each srtd job's journal, keyed by the journal's own seq
    """
    CREATE TABLE journal (
        job_id TEXT NOT NULL REFERENCES jobs(job_id),
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (job_id, seq)
    ) WITHOUT ROWID;
    """,
    # 3: a revision per job (any write to it: status, journal) for the job page's live feed, and the
    # outcome srtd's journal gave it (`cancelled` for a stop by the user, whatever the status says)
    """
    ALTER TABLE jobs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN outcome TEXT;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
JOB_COLUMNS = (
    "job_id",
    "job_name",
    "cluster",
    "recipe",
    "submitted_at",
    "status",
    "stage",
    "message",
    "started_at",
    "completed_at",
    "exit_code",
    "logs_url",
    "benchmark_results",
    "artifacts",
    "metadata",
    "placeholder",
    "updated_at",
    "outcome",
)
JSON_COLUMNS = ("benchmark_results", "artifacts", "metadata")
FEED_LIMIT = 500  # events per page of a cursor feed


def journal_outcome(events: Iterable[Event]) -> str | None:
    """`cancelled` when the batch holds the job's end by a stop (a signal, not its time limit)."""
    for event in events:
        if event.unit is None and event.state == JobState.CANCELLED and not (event.detail or {}).get("time_limit"):
            return JobState.CANCELLED.value
    return None


class SchemaTooNew(Exception):
    """The file was written by a newer collector."""


def open_db(path: Path) -> sqlite3.Connection:
    """The database at `path` (created on first start), migrated to `SCHEMA_VERSION`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=5000")
    migrate(db)
    return db


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations the file has not had yet, each in its own transaction."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"schema version {version}, this collector knows up to {SCHEMA_VERSION}")
    for number in range(version + 1, SCHEMA_VERSION + 1):
        db.executescript(f"BEGIN; {MIGRATIONS[number - 1]} PRAGMA user_version = {number}; COMMIT;")
    return SCHEMA_VERSION


def _merged(old: str | None, new: dict[str, Any] | None) -> str:
    merged = json.loads(old) if old else {}
    merged.update(new or {})
    return json.dumps(merged)


class Store:
    """The jobs, their events and their journals; `clock` is injectable for tests."""

    def __init__(self, db: sqlite3.Connection, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def close(self) -> None:
        self.db.close()

    # -------------------------------------------------------------- writes
    def record_post(self, body: JobCreate) -> bool:
        """A submitted job; True when it is new.  A late POST fills in, never rewinds the status."""
        with self._transaction():
            old = self._job_row(body.job_id)
            now = self.clock()
            if old is None:
                self.db.execute(
                    "INSERT INTO jobs (job_id, job_name, cluster, recipe, submitted_at, status, metadata,"
                    " created_at, changed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        body.job_id,
                        body.job_name,
                        body.cluster,
                        body.recipe,
                        body.submitted_at,
                        Status.SUBMITTED.value,
                        json.dumps(body.metadata),
                        now,
                        now,
                    ),
                )
                self._event(body.job_id, body.submitted_at, Status.SUBMITTED.value, None, None)
                return True
            if self._last_triple(body.job_id) is None:
                # only a journal batch came first (it makes a bare placeholder): the submission is
                # still the job's first status, and its history starts with it as if it had come first
                self._event(body.job_id, body.submitted_at, Status.SUBMITTED.value, None, None)
            # what the job's updates already said wins over what the submission says
            metadata = json.loads(old["metadata"])
            metadata = {**body.metadata, **metadata}
            self.db.execute(
                "UPDATE jobs SET job_name = ?, cluster = COALESCE(cluster, ?), recipe = COALESCE(recipe, ?),"
                " submitted_at = COALESCE(submitted_at, ?), metadata = ?, placeholder = 0, changed = ?,"
                " revision = revision + 1"
                " WHERE job_id = ?",
                (body.job_name, body.cluster, body.recipe, body.submitted_at, json.dumps(metadata), now, body.job_id),
            )
            return False

    def record_put(self, job_id: str, body: JobUpdate) -> bool:
        """An update; True when it made a placeholder (a PUT for a job never POSTed)."""
        with self._transaction():
            old = self._job_row(job_id)
            now = self.clock()
            placeholder = old is None
            if placeholder:
                self.db.execute(
                    "INSERT INTO jobs (job_id, status, placeholder, created_at, changed) VALUES (?, ?, 1, ?, ?)",
                    (job_id, body.status.value, now, now),
                )
                old = self._job_row(job_id)
            assert old is not None
            sets: dict[str, Any] = {"status": body.status.value, "updated_at": body.updated_at, "changed": now}
            for key in ("stage", "message", "started_at", "completed_at", "exit_code", "logs_url"):
                value = getattr(body, key)
                if value is not None:
                    sets[key] = value.value if isinstance(value, StrEnum) else value
            if body.benchmark_results is not None:
                sets["benchmark_results"] = json.dumps(body.benchmark_results)
            if body.artifacts is not None:
                sets["artifacts"] = _merged(old["artifacts"], body.artifacts)
            if body.metadata is not None:
                sets["metadata"] = _merged(old["metadata"], body.metadata)
            columns = ", ".join(f"{k} = ?" for k in sets)
            self.db.execute(
                f"UPDATE jobs SET {columns}, revision = revision + 1 WHERE job_id = ?", (*sets.values(), job_id)
            )
            triple = (body.status.value, sets.get("stage", old["stage"]), sets.get("message", old["message"]))
            if triple != self._last_triple(job_id):
                self._event(job_id, body.updated_at, *triple)
            return placeholder

    def record_journal(self, job_id: str, events: Iterable[Event]) -> int:
        """Journal events of an srtd job; the number new (a batch sent twice is recorded once)."""
        with self._transaction():
            if self._job_row(job_id) is None:
                now = self.clock()
                self.db.execute(
                    "INSERT INTO jobs (job_id, status, placeholder, created_at, changed) VALUES (?, ?, 1, ?, ?)",
                    (job_id, Status.SUBMITTED.value, now, now),
                )
            events = list(events)
            before = self.db.total_changes
            self.db.executemany(
                "INSERT OR IGNORE INTO journal (job_id, seq, event) VALUES (?, ?, ?)",
                [(job_id, e.seq, e.to_json()) for e in events],
            )
            new = self.db.total_changes - before
            outcome = journal_outcome(events)
            self.db.execute(
                "UPDATE jobs SET changed = ?, revision = revision + 1, outcome = COALESCE(?, outcome) WHERE job_id = ?",
                (self.clock(), outcome, job_id),
            )
            return new

    # -------------------------------------------------------------- reads
    def job(self, job_id: str) -> dict[str, Any] | None:
        row = self._job_row(job_id)
        return _job_dict(row) if row is not None else None

    def jobs(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM jobs ORDER BY created_at DESC, job_id").fetchall()
        return [_job_dict(r) for r in rows]

    def events(self, after: int, job_id: str | None = None, limit: int = FEED_LIMIT) -> list[dict[str, Any]]:
        """The events after cursor `after`, oldest first, at most `limit`."""
        if job_id is None:
            rows = self.db.execute("SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit))
        else:
            rows = self.db.execute(
                "SELECT * FROM events WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?", (job_id, after, limit)
            )
        return [{k: r[k] for k in ("seq", "job_id", "at", "status", "stage", "message")} for r in rows]

    def revision(self, job_id: str) -> int | None:
        """The job's revision: it grows with every write to the job (None: no such job)."""
        row = self.db.execute("SELECT revision FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return int(row[0]) if row is not None else None

    def last_seq(self) -> int:
        return int(self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def journal(self, job_id: str) -> list[Event]:
        rows = self.db.execute("SELECT event FROM journal WHERE job_id = ? ORDER BY seq", (job_id,))
        return [Event.from_line(r[0]) for r in rows]

    def journal_lines(self, job_id: str) -> list[str]:
        """The journal as its stored JSON lines: parsing them is left to whoever renders them."""
        rows = self.db.execute("SELECT event FROM journal WHERE job_id = ? ORDER BY seq", (job_id,))
        return [r[0] for r in rows]

    def journal_ready_seconds(self, job_id: str) -> float | None:
        """From the journal's first event to the job's `running` event, found by SQLite (no fold)."""
        row = self.db.execute(
            "SELECT (SELECT json_extract(event, '$.ts') FROM journal WHERE job_id = ?1"
            "        AND json_extract(event, '$.state') = 'running' AND json_extract(event, '$.unit') IS NULL"
            "        ORDER BY seq LIMIT 1)"
            " - (SELECT json_extract(event, '$.ts') FROM journal WHERE job_id = ?1 ORDER BY seq LIMIT 1)",
            (job_id,),
        ).fetchone()
        return float(row[0]) if row is not None and row[0] is not None else None

    def journal_counts(self, job_id: str) -> tuple[int, int]:
        """The job's unit restarts (launches with an attempt above 0) and lost nodes (`node` events
        with `what: lost`, docs/events.md), counted by SQLite from the stored journal."""
        row = self.db.execute(
            "SELECT"
            " COALESCE(SUM(json_extract(event, '$.unit') IS NOT NULL AND json_extract(event, '$.state') = 'starting'"
            "     AND COALESCE(json_extract(event, '$.attempt'), 0) > 0), 0),"
            " COALESCE(SUM(json_extract(event, '$.detail.node.what') = 'lost'), 0)"
            " FROM journal WHERE job_id = ?",
            (job_id,),
        ).fetchone()
        return int(row[0]), int(row[1])

    # -------------------------------------------------------------- helpers
    def _job_row(self, job_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.db.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return row

    def _last_triple(self, job_id: str) -> tuple[Any, Any, Any] | None:
        row = self.db.execute(
            "SELECT status, stage, message FROM events WHERE job_id = ? ORDER BY seq DESC LIMIT 1", (job_id,)
        ).fetchone()
        return (row[0], row[1], row[2]) if row is not None else None

    def _event(self, job_id: str, at: str | None, status: str, stage: str | None, message: str | None) -> None:
        self.db.execute(
            "INSERT INTO events (job_id, at, received, status, stage, message) VALUES (?, ?, ?, ?, ?, ?)",
            (job_id, at, self.clock(), status, stage, message),
        )

    def _transaction(self) -> _Transaction:
        return _Transaction(self.db)


class _Transaction:
    """BEGIN IMMEDIATE .. COMMIT (ROLLBACK on an error): one writer, no lock upgrade surprises."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def _job_dict(row: sqlite3.Row) -> dict[str, Any]:
    job = {k: row[k] for k in JOB_COLUMNS}
    for key in JSON_COLUMNS:
        job[key] = json.loads(job[key]) if job[key] is not None else None
    job["placeholder"] = bool(job["placeholder"])
    # what the dashboard shows: srtd's own word for a stop by the user (the contract's status stays)
    job["shown_status"] = job.pop("outcome") or job["status"]
    return job
