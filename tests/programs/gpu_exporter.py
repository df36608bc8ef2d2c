"""A GPU exporter for tests: DCGM's power metric for N GPUs over HTTP, as dcgm-exporter writes it.

    python gpu_exporter.py --port P [--gpus N] [--watts W]

GPU i draws W + 10 * i watts.  Serves `/metrics` until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1", help="the address it listens on (a dev cluster node's: 0.0.0.0)")
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--watts", type=float, default=100.0)
    args = p.parse_args()
    lines = ["# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).", "# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
    for i in range(args.gpus):
        lines.append(f'DCGM_FI_DEV_POWER_USAGE{{gpu="{i}",UUID="GPU-{i:04d}"}} {args.watts + 10 * i}')
    body = ("\n".join(lines) + "\n").encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"gpu exporter on :{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
