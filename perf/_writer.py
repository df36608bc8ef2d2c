"""Appends a line to each of many files, `--rate` times a second, until SIGTERM (stdlib only).

    _writer.py --rate 10 FILE...

Prints how many lines it wrote and over how many seconds when it stops.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    fds = [os.open(f, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for f in args.files]
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    written, began, tick = 0, time.monotonic(), 0
    line = b"INFO decode batch: 32 reqs, 4096 tokens, gen throughput 1234.5 tok/s\n"
    while not stop:
        for fd in fds:
            os.write(fd, line)
        written += len(fds)
        tick += 1
        time.sleep(max(0.0, began + tick / args.rate - time.monotonic()))
    print(f"{written} {time.monotonic() - began:.3f}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
