"""A status collector for tests: srt-slurm's two job routes, on loopback, stdlib only.

    python collector.py --record FILE --port-file FILE [--token TOKEN] [--answer CODE]

Implements `POST /api/jobs` (201), `PUT /api/jobs/<id>` (200) and `GET /api/health`,
validates every body against the contract (status and stage values, required and
known fields, ISO 8601 times; 422 otherwise, 413 over 1 MiB, 401 for a wrong token)
and appends one JSON line per request to FILE: method, path, the Authorization
header, the body, the answer and what was wrong with it.  `--answer CODE` answers
every job request with CODE instead (302 with a Location, 401, ...).  The values are
written out here, not imported from srtd, so the test checks srtd against the contract.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STATUSES = {"submitted", "starting", "workers", "frontend", "benchmark", "completed", "failed", "timeout"}
STAGES = {"starting", "head_infrastructure", "preflight", "workers", "frontend", "benchmark", "cleanup"}
POST_FIELDS = {"job_id", "job_name", "cluster", "recipe", "submitted_at", "metadata"}
PUT_FIELDS = {
    "status",
    "updated_at",
    "stage",
    "message",
    "started_at",
    "completed_at",
    "exit_code",
    "logs_url",
    "benchmark_results",
    "artifacts",
    "metadata",
}
MAX_BODY = 1 << 20


def _iso(value: Any) -> bool:
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return False
    return True


def check_post(body: dict[str, Any]) -> list[str]:
    wrong = [f"unknown field {k}" for k in body if k not in POST_FIELDS]
    wrong += [f"missing {k}" for k in ("job_id", "job_name", "submitted_at") if k not in body]
    if not isinstance(body.get("job_id"), str) or not body.get("job_id"):
        wrong.append("job_id must be a non-empty string")
    if "submitted_at" in body and not _iso(body["submitted_at"]):
        wrong.append("submitted_at is not ISO 8601")
    if not isinstance(body.get("metadata", {}), dict):
        wrong.append("metadata must be an object")
    return wrong


def check_put(body: dict[str, Any]) -> list[str]:
    wrong = [f"unknown field {k}" for k in body if k not in PUT_FIELDS]
    if body.get("status") not in STATUSES:
        wrong.append(f"bad status {body.get('status')!r}")
    if not _iso(body.get("updated_at")):
        wrong.append("updated_at missing or not ISO 8601")
    if "stage" in body and body["stage"] not in STAGES:
        wrong.append(f"bad stage {body['stage']!r}")
    for key in ("started_at", "completed_at"):
        if key in body and not _iso(body[key]):
            wrong.append(f"{key} is not ISO 8601")
    if "exit_code" in body and not isinstance(body["exit_code"], int):
        wrong.append("exit_code must be an integer")
    if not isinstance(body.get("metadata", {}), dict):
        wrong.append("metadata must be an object")
    return wrong


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Collector

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, code: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/api/health":
            self._answer(200, {"status": "ok"})
        else:
            self._answer(404, {"detail": "not found"})

    def do_POST(self) -> None:
        self._job("POST")

    def do_PUT(self) -> None:
        self._job("PUT")

    def _job(self, method: str) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        auth = self.headers.get("Authorization")
        record: dict[str, Any] = {"method": method, "path": self.path, "authorization": auth}
        wrong: list[str] = []
        body: Any = None
        if length > MAX_BODY:
            code = 413
        else:
            try:
                body = json.loads(raw)
            except ValueError:
                body, wrong = None, ["not JSON"]
            if not isinstance(body, dict):
                wrong = wrong or ["not an object"]
            elif method == "POST" and self.path == "/api/jobs":
                wrong = check_post(body)
            elif method == "PUT" and self.path.startswith("/api/jobs/") and len(self.path) > len("/api/jobs/"):
                wrong = check_put(body)
            else:
                wrong = [f"no route {method} {self.path}"]
            code = (201 if method == "POST" else 200) if not wrong else 422
        if self.server.token is not None and auth != f"Bearer {self.server.token}":
            code = 401
        extra = None
        if self.server.forced is not None:
            code = self.server.forced
            extra = {"Location": "http://127.0.0.1:9/login"} if 300 <= code < 400 else None
        record.update(body=body, answer=code, wrong=wrong)
        with open(self.server.record, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self._answer(code, {"ok": code < 300, "wrong": wrong}, extra)


class Collector(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, record: Path, token: str | None, forced: int | None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.record = record
        self.token = token
        self.forced = forced


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--token")
    parser.add_argument("--answer", type=int)
    parser.add_argument("--tag", help="ignored: marks the process for the leftover scan")
    args = parser.parse_args()
    server = Collector(args.record, args.token, args.answer)
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.rename(args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
