"""A scriptable stand-in for a supervised process (standard library only).

Everything it does is timed from its start and can be recorded in a marker file
(JSON lines: start, signal, exit, each with a wall-clock `t`, the pid and the attempt
from SRTD_ATTEMPT), so tests can check order, overlap and timing from the outside.

    --marker FILE           record start / signal / exit events
    --say T:TEXT            print TEXT (one line) at T seconds; {attempt} is replaced
    --partial T:TEXT        write TEXT without a newline at T seconds
    --listen PORT[:T]       accept TCP connections on 127.0.0.1:PORT from T seconds
    --http PORT[:T]         serve HTTP on 127.0.0.1:PORT from T seconds
    --body JSON             the body every HTTP GET answers (200)
    --exit CODE[:T]         exit with CODE at T seconds (every attempt)
    --crash ATTEMPTS:CODE:T exit with CODE at T seconds on the listed attempts (0,1)
    --freeze ATTEMPTS:T     SIGSTOP itself at T seconds on the listed attempts (0,1): a hang
    --ignore-term           ignore SIGTERM
    --term-exit CODE        on SIGTERM exit with CODE (default: die of SIGTERM)
    --term-delay T          on SIGTERM wait T seconds before going
    --spawn-child           start a grandchild (same process group) that sleeps forever
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time

START = time.time()
ATTEMPT = int(os.environ.get("SRTD_ATTEMPT", "0"))
MARKER: str | None = None
LOCK = threading.Lock()


def record(event: str, **fields: object) -> None:
    if MARKER is None:
        return
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), "attempt": ATTEMPT, **fields})
    with LOCK, open(MARKER, "a") as f:
        f.write(line + "\n")


def split_time(spec: str) -> tuple[str, float]:
    head, sep, tail = spec.rpartition(":")
    if sep and tail.replace(".", "", 1).isdigit():
        return head, float(tail)
    return spec, 0.0


def main_thread_signals_only() -> None:
    # A stopped process gets its pending SIGTERM delivered, once SIGCONT wakes it, to
    # whichever thread runs first; the Python handler only runs promptly when that is
    # the main thread (the others never interrupt its sleep).  Server threads and the
    # threads they spawn (which inherit the mask) therefore block the stop signals.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})


def listen(port: int) -> None:
    main_thread_signals_only()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    while True:
        conn, _ = server.accept()
        conn.close()


def serve_http(port: int, body: str) -> None:
    main_thread_signals_only()
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    global MARKER
    p = argparse.ArgumentParser()
    p.add_argument("--marker")
    p.add_argument("--say", action="append", default=[])
    p.add_argument("--partial", action="append", default=[])
    p.add_argument("--listen")
    p.add_argument("--http")
    p.add_argument("--body", default='{"ok": true}')
    p.add_argument("--exit")
    p.add_argument("--crash", action="append", default=[])
    p.add_argument("--freeze", action="append", default=[])
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--term-exit", type=int)
    p.add_argument("--term-delay", type=float, default=0.0)
    p.add_argument("--spawn-child", action="store_true")
    p.add_argument("--tag", help="ignored; lets a test find this process")
    args = p.parse_args()
    MARKER = args.marker
    record("start")

    def on_term(signum: int, frame: object) -> None:
        record("signal", sig=signum)
        if args.ignore_term:
            return
        if args.term_delay:
            time.sleep(args.term_delay)
        record("exit", code=args.term_exit, sig=None if args.term_exit is not None else signum)
        if args.term_exit is not None:
            os._exit(args.term_exit)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    if args.spawn_child:
        import subprocess

        subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(3600)", "--tag", str(args.tag)])

    actions: list[tuple[float, str, str]] = []
    for spec in args.say:
        at_s, text = spec.split(":", 1)
        actions.append((float(at_s), "say", text.replace("{attempt}", str(ATTEMPT))))
    for spec in args.partial:
        at_s, text = spec.split(":", 1)
        actions.append((float(at_s), "partial", text))
    if args.listen:
        port, at = split_time(args.listen)
        actions.append((at, "listen", port))
    if args.http:
        port, at = split_time(args.http)
        actions.append((at, "http", port))
    if args.exit:
        code, at = split_time(args.exit)
        actions.append((at, "exit", code))
    for spec in args.crash:
        attempts, code, at_s = spec.split(":")
        if str(ATTEMPT) in attempts.split(","):
            actions.append((float(at_s), "exit", code))
    for spec in args.freeze:
        attempts, at_s = spec.split(":")
        if str(ATTEMPT) in attempts.split(","):
            actions.append((float(at_s), "freeze", ""))
    actions.sort(key=lambda a: (a[0], a[1] == "exit"))

    for at, kind, value in actions:
        delay = START + at - time.time()
        if delay > 0:
            time.sleep(delay)
        if kind == "say":
            # Recorded first: srtd may stop us the moment the line is out (a fatal line
            # is seen within milliseconds), before a mark written after it.
            record("say", text=value)
            sys.stdout.write(value + "\n")
            sys.stdout.flush()
        elif kind == "partial":
            sys.stdout.write(value)
            sys.stdout.flush()
        elif kind == "listen":
            threading.Thread(target=listen, args=(int(value),), daemon=True).start()
        elif kind == "http":
            threading.Thread(target=serve_http, args=(int(value), args.body), daemon=True).start()
        elif kind == "freeze":
            record("freeze")
            os.kill(os.getpid(), signal.SIGSTOP)  # every thread stops; the kernel still accepts
        elif kind == "exit":
            record("exit", code=int(value))
            sys.stdout.flush()
            os._exit(int(value))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
