#!/usr/bin/env python3
"""A stand-in for Nsight Systems' `nsys` CLI: records every call, writes the reports nsys would.

Each call appends its argv as one JSON line to `$FAKE_NSYS_LOG`.  The state of each named
session (the application's pid, the open report) is a JSON file under `$FAKE_NSYS_STATE`.

    launch --session-new=S ... CMD   run CMD as a child; nothing is captured until `start`
    start --session=S --output=B     open a capture; `stop` writes B.nsys-rep
    stop --session=S                 write the open report (non-empty)
    shutdown --session=S --kill=sigterm   SIGTERM the application
    profile ... -o B CMD             run CMD, then write B.nsys-rep
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path


def _log(argv: list[str]) -> None:
    with open(os.environ["FAKE_NSYS_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(argv) + "\n")


def _option(argv: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}="))


def _state(session: str) -> Path:
    return Path(os.environ["FAKE_NSYS_STATE"]) / f"{session}.json"


def _report(base: str) -> None:
    path = Path(base + ".nsys-rep")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("fake nsys report\n")


def _run(command: list[str]) -> int:
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    return child.wait()


def _launch(argv: list[str]) -> int:
    session = _option(argv, "session-new")
    first = next(i for i, a in enumerate(argv[1:], 1) if not a.startswith("--"))  # nsys' own options end
    child = subprocess.Popen(argv[first:])
    _state(session).parent.mkdir(parents=True, exist_ok=True)
    _state(session).write_text(json.dumps({"pid": child.pid}))
    return child.wait()


def _profile(argv: list[str]) -> int:
    i = argv.index("-o")
    code = _run(argv[i + 2 :])
    _report(argv[i + 1])
    return code


def main(argv: list[str]) -> int:
    _log(argv)
    action = argv[0]
    if action == "launch":
        return _launch(argv)
    if action == "profile":
        return _profile(argv)
    state = _state(_option(argv, "session"))
    data = json.loads(state.read_text())
    if action == "start":
        data["output"] = _option(argv, "output")
    elif action == "stop":
        _report(data.pop("output"))
    elif action == "shutdown":
        os.kill(data["pid"], signal.SIGTERM)
    state.write_text(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
