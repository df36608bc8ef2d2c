"""A stand-in server for benchmark units (standard library only, started with `python -S`).

    _prog.py --marker FILE [--tcp PORT | --http PORT] [--after T] [--say TEXT]
             [--exit-after T [--code C]]

After `T` seconds it becomes ready: listens on PORT (`--tcp`), serves HTTP 200 on
every path (`--http`), or only prints (`--say` alone).  `--say` prints TEXT right
after it is ready, as servers announce that they listen.  Every moment that matters
is appended to the marker file as `<event> <wall-clock time>`: `start`, `ready`,
`exit` (written just before it exits with `--code`).
"""

from __future__ import annotations

import argparse
import http.server
import os
import socket
import sys
import threading
import time


def mark(path: str | None, event: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(f"{event} {time.time():.6f}\n")


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--marker")
    p.add_argument("--tcp", type=int)
    p.add_argument("--http", type=int)
    p.add_argument("--after", type=float, default=0.0)
    p.add_argument("--say")
    p.add_argument("--exit-after", type=float)
    p.add_argument("--code", type=int, default=0)
    args = p.parse_args()
    start = time.time()
    mark(args.marker, "start")
    if args.exit_after is not None:
        time.sleep(max(0.0, start + args.exit_after - time.time()))
        mark(args.marker, "exit")
        os._exit(args.code)
    time.sleep(max(0.0, start + args.after - time.time()))
    if args.tcp is not None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.tcp))
        sock.listen(128)

        def accept_forever() -> None:
            while True:
                sock.accept()[0].close()

        threading.Thread(target=accept_forever, daemon=True).start()
    elif args.http is not None:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", args.http), _Ok)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    mark(args.marker, "ready")
    if args.say:
        sys.stdout.write(args.say + "\n")
        sys.stdout.flush()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
