"""srtd's Nsight Systems window: one program, run with `python3` inside each step's container.

srtd writes this file into the job's log directory (`<logs>/profiles/nsys_window.py`), which
every container already mounts, so no image needs srtd installed.  It imports nothing but
the standard library.  Three commands:

    python3 nsys_window.py worker --spec JSON -- COMMAND...   wrap one profiled process
    python3 nsys_window.py start                              open a capture window
    python3 nsys_window.py stop                               close it (the report is written)

`worker` runs COMMAND under an idle named nsys session (`nsys launch`) and waits for
requests in the control directory; `start`/`stop` (the benchmark client, or a person at a
shell) publish a request there and wait until every profiled process acknowledged it, so
the measured traffic starts only once every profiler captures, and `stop` returns once
every report is on disk.  The control directory (`SRT_NSYS_CONTROL_DIR`) holds:

    steps/<step>.json          {"ranks": N}: who takes part (written by srtd before launch)
    ready/<step>-<rank>.json   the process's session is up
    requests/<seq>.json        {"action": "start" | "stop", "window": W}
    acks/<seq>/<step>-<rank>.json   {"ok": true} or {"ok": false, "error": ...}
    failed/<step>-<rank>.json  a profiled process that failed (the client stops waiting)
    client.json                the client's state: sequence, window, active

On SIGTERM (srtd's teardown) a wrapper closes an open window first, marks itself done in
`SRT_NSYS_REPORT_BARRIER_DIR` and waits (at most `SRT_NSYS_REPORT_STOP_TIMEOUT` seconds)
until the `SRT_NSYS_REPORT_EXPECTED` processes of its step are done too, so no rank's
application goes away while another still exports its report; then it ends the session.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.1
APP_GRACE_SECONDS = 120.0
CONTROL_TIMEOUT_SECONDS = 10.0  # `nsys shutdown` is quick or stuck


class WindowError(RuntimeError):
    """A window request that cannot be honoured; the message is the one line printed."""


# --------------------------------------------------------------------------- files


def write_json(path: Path, value: Any) -> None:
    """Atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    partial.write_text(json.dumps(value) + "\n")
    partial.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def participants(root: Path) -> set[str]:
    """Every `<step>-<rank>` the steps directory announces."""
    out: set[str] = set()
    for path in (root / "steps").glob("*.json"):
        out.update(f"{path.stem}-{rank}" for rank in range(int(read_json(path)["ranks"])))
    return out


def first_failure(root: Path) -> str | None:
    for path in sorted((root / "failed").glob("*.json")):
        return f"{path.stem}: {read_json(path).get('error', 'failed')}"
    return None


def wait_for(root: Path, folder: Path, expected: set[str], timeout: float, what: str) -> None:
    """Until every expected participant has an `ok` file in `folder`; a failure ends the wait."""
    deadline = time.monotonic() + timeout
    while True:
        failure = first_failure(root)
        if failure:
            raise WindowError(f"nsys {what}: a profiled process failed ({failure})")
        missing = sorted(p for p in expected if not (folder / f"{p}.json").exists())
        for name in expected - set(missing):
            answer = read_json(folder / f"{name}.json")
            if not answer.get("ok"):
                raise WindowError(f"nsys {what}: {name} answered {answer.get('error', 'not ok')}")
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise WindowError(f"nsys {what}: no answer after {timeout:g} s from {', '.join(missing)}")
        time.sleep(POLL_SECONDS)


# --------------------------------------------------------------------------- the client


@contextmanager
def client_lock(root: Path) -> Iterator[None]:
    """One client drives a capture at a time; a second one fails at once instead of waiting."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "client.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WindowError("another client is driving this capture") from None
        yield


def request(root: Path, action: str, timeout: float) -> None:
    """Publish `start` or `stop` and return once every profiled process acknowledged it."""
    with client_lock(root):
        state_file = root / "client.json"
        state = read_json(state_file) if state_file.exists() else {"sequence": 0, "window": 0, "active": False}
        if action == "stop" and not state["active"]:
            return  # nothing is captured: stopping is a no-op, so a client may always call it
        if action == "start" and state["active"]:
            raise WindowError("a capture window is already open; stop it first")
        expected = participants(root)
        if not expected:
            raise WindowError(f"no profiled process is announced under {root / 'steps'}")
        wait_for(root, root / "ready", expected, timeout, "ready")
        state["sequence"] += 1
        if action == "start":
            state["window"] += 1
        state["active"] = action == "start"
        write_json(state_file, state)  # before the request: an interrupted client leaves `active` behind
        seq = f"{state['sequence']:06d}"
        write_json(root / "requests" / f"{seq}.json", {"action": action, "window": state["window"]})
        wait_for(root, root / "acks" / seq, expected, timeout, action)


# --------------------------------------------------------------------------- the wrapper


def descendants(pid: int) -> set[int]:
    """The process tree below pid (every thread's children: nsys forks from a helper thread)."""
    found: set[int] = set()
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        with suppress(OSError):
            found.update(int(child) for child in path.read_text().split())
    for child in list(found):
        found |= descendants(child)
    return found


def kill_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


class Wrapper:
    """One profiled process: its nsys session, the requests it answers, its report barrier."""

    def __init__(self, spec: dict[str, Any], command: list[str]) -> None:
        self.root = Path(spec["control_dir"])
        self.rank = os.environ.get("SLURM_PROCID", "0")
        self.step = str(spec["step"])
        self.me = f"{self.step}-{self.rank}"
        self.session = f"srtd-{self.me}-{os.getpid()}"
        self.nsys = str(spec["nsys"])
        self.start_args = [str(a) for a in spec.get("start_args", [])]
        self.output = str(spec["output"]).replace("%q{SLURM_PROCID}", self.rank)
        self.timeout = float(spec.get("timeout", 1800))
        self.command = command
        self.stopping = False
        self.report: Path | None = None  # the open window's report
        self.seen = 0  # the last request answered
        self.ok = True  # every request so far succeeded (the exit code)

    def on_signal(self, _sig: int, _frame: object) -> None:
        self.stopping = True  # only a flag: the loop notices it

    def control(self, *args: str) -> None:
        limit = CONTROL_TIMEOUT_SECONDS if args[0] == "shutdown" else self.timeout
        subprocess.run([self.nsys, *args, f"--session={self.session}"], check=True, timeout=limit)

    def forget_earlier_attempt(self) -> None:
        """A restarted process starts afresh: not ready, not failed, and past every request so far
        (replaying an old window would capture the wrong traffic)."""
        for folder in ("ready", "failed"):
            (self.root / folder / f"{self.me}.json").unlink(missing_ok=True)
        self.seen = max((int(p.stem) for p in (self.root / "requests").glob("*.json")), default=0)

    def launch(self) -> subprocess.Popen[bytes]:
        self.forget_earlier_attempt()
        argv = [self.nsys, "launch", f"--session-new={self.session}", "--trace=nvtx", "--show-output=true"]
        proc = subprocess.Popen([*argv, *self.command], start_new_session=True)
        deadline = time.monotonic() + self.timeout
        # The application below nsys proves the session exists.
        while not descendants(proc.pid):
            if proc.poll() is not None:
                raise WindowError(f"nsys launch exited with {proc.returncode} before the application started")
            if self.stopping or time.monotonic() >= deadline:
                raise WindowError("the application did not start under nsys")
            time.sleep(POLL_SECONDS)
        write_json(self.root / "ready" / f"{self.me}.json", {"ok": True, "session": self.session})
        return proc

    def answer(self, seq: str, event: dict[str, Any]) -> None:
        """Do one request and acknowledge it.  A request that fails is answered as failed and
        marks this process failed (the client stops there), but the application keeps serving:
        a broken capture fails the measurement, not the job's workers."""
        try:
            if event["action"] == "start":
                self.open(int(event["window"]))
            else:
                self.close()
        except (OSError, WindowError, subprocess.SubprocessError) as err:
            self.ok = False
            self.fail(err)
            write_json(self.root / "acks" / seq / f"{self.me}.json", {"ok": False, "error": str(err)})
            return
        write_json(self.root / "acks" / seq / f"{self.me}.json", {"ok": True})

    def open(self, window: int) -> None:
        if self.report is not None:
            raise WindowError("start while a window is open")
        base = f"{self.output}_window{window:03d}"
        self.control("start", *self.start_args, f"--output={base}", "--force-overwrite=true")
        self.report = Path(f"{base}.nsys-rep")

    def close(self) -> None:
        if self.report is None:
            raise WindowError("stop without an open window")
        report, self.report = self.report, None
        self.control("stop")
        if not report.is_file() or report.stat().st_size == 0:
            raise WindowError(f"nsys stop wrote no report at {report}")

    def serve(self, proc: subprocess.Popen[bytes]) -> None:
        """Answer requests in order until teardown; the application ending first is a failure."""
        while not self.stopping:
            if proc.poll() is not None:
                raise WindowError(f"the profiled application exited with {proc.returncode}")
            for path in sorted((self.root / "requests").glob("*.json")):
                if int(path.stem) > self.seen and not self.stopping:
                    self.answer(path.stem, read_json(path))
                    self.seen = int(path.stem)
            time.sleep(POLL_SECONDS)

    def barrier(self, ok: bool) -> None:
        """Wait for the other ranks of this step to finish their reports (bounded)."""
        folder = Path(os.environ.get("SRT_NSYS_REPORT_BARRIER_DIR") or self.root / "teardown" / self.step)
        expected = int(os.environ.get("SRT_NSYS_REPORT_EXPECTED", "1"))
        budget = float(os.environ.get("SRT_NSYS_REPORT_STOP_TIMEOUT", str(self.timeout)))
        write_json(folder / f"{self.me}.json", {"ok": ok})
        names = {f"{self.step}-{rank}" for rank in range(expected)}
        deadline = time.monotonic() + budget
        while any(not (folder / f"{n}.json").exists() for n in names) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)

    def shut_down(self, proc: subprocess.Popen[bytes]) -> None:
        tree = descendants(proc.pid)
        try:
            self.control("shutdown", "--kill=sigterm")
        except (OSError, subprocess.SubprocessError):
            kill_all(tree, signal.SIGTERM)
        try:
            proc.wait(timeout=APP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            kill_all(tree | descendants(proc.pid), signal.SIGKILL)
            proc.kill()
            proc.wait(timeout=5)
        kill_all(tree, signal.SIGKILL)  # an application that ignored TERM outlives the session otherwise

    def fail(self, err: BaseException) -> None:
        print(f"[srtd nsys] {self.me}: {err}", file=sys.stderr, flush=True)
        write_json(self.root / "failed" / f"{self.me}.json", {"error": str(err)})

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        try:
            proc = self.launch()
        except (OSError, WindowError) as err:
            self.fail(err)
            return 1
        try:
            self.serve(proc)
        except (OSError, ValueError, WindowError, subprocess.SubprocessError) as err:
            self.ok = False
            self.fail(err)
        finally:
            if self.report is not None:
                try:
                    self.close()  # teardown interrupted a window: its report still gets written
                except (OSError, WindowError, subprocess.SubprocessError) as err:
                    self.ok = False
                    self.fail(err)
            self.barrier(self.ok)
            self.shut_down(proc)
        return 0 if self.ok else 1


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nsys_window.py", description="srtd's Nsight Systems capture window")
    parser.add_argument("action", choices=("worker", "start", "stop"))
    parser.add_argument("--spec", help="worker: the wrapper's settings as JSON")
    args, rest = parser.parse_known_args(argv)
    if args.action == "worker":
        command = rest[1:] if rest[:1] == ["--"] else rest
        if not args.spec or not command:
            parser.error("worker needs --spec and the command to profile")
        return Wrapper(json.loads(args.spec), command).run()
    root = os.environ.get("SRT_NSYS_CONTROL_DIR")
    if not root:
        return 0  # no capture in this job: the hooks are no-ops, so a client may always call them
    try:
        request(Path(root), args.action, float(os.environ.get("SRT_NSYS_CONTROL_TIMEOUT", "1800")))
    except WindowError as err:
        print(f"[srtd nsys] {args.action}: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
