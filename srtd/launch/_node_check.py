"""The preflight check of one node, run on that node (`python -I -S .../srtd/launch/_node_check.py`).

The supervisor starts it through the launcher (one Slurm step per node, or a local
process) before any unit launches, with what the plan gives the node: its GPU indices,
its ports, the log directory, the largest share of GPU memory an engine there asks for.
It prints one JSON line, `{"ok", "check", "evidence", "notes"}`, and exits 0 whatever it
found: the verdict is the line, so a check that could not run at all is told apart.

Checks, in order (the first failing one is the verdict):
- `log-dir`: a file can be created in the log directory from this node;
- `ports`: nothing listens on any of the plan's ports here;
- `gpus-visible`: the GPU query lists every GPU index the plan gives the node;
- `gpus-foreign`: no process holds memory on those GPUs;
- `gpus-memory`: their free memory covers the share the engines ask for.
A missing GPU query program skips the GPU checks (a note says so): a node without
nvidia-smi cannot be asked, and a plan for CPU-only toys must still run.

It is a program of its own, run by its path with `-I -S`: it imports nothing of srtd's
and no site-packages, and every job's start waits for it.  So it loads only what the
interpreter has loaded already (`posix` rather than `os`, 1 ms; no `from __future__`,
an import too) and two C modules: `_socket` rather than `socket` (its IntEnum constants)
and `_json`'s string quoting rather than `json` (which loads re); its options are read
without argparse; each of those three took about 7 ms.  What only the GPU checks need
loads when they run.  It takes about 9 ms where a bare `python -I -S -c pass` takes 7
(24 with argparse, socket and json; 20 as `python -m`): most of the rest is compiling this
file, as every program run by its path is.  It still runs as `python -m srtd.launch._node_check`.
"""

import posix  # what os gives of it, without importing os (1 ms)
import sys
from _json import encode_basestring_ascii as _quote  # the C function json.dumps quotes strings with
from _socket import AF_INET, SO_REUSEADDR, SOCK_STREAM, SOL_SOCKET, socket

GPU_FIELDS = "--query-gpu=index,uuid,memory.total,memory.free"
APP_FIELDS = "--query-compute-apps=gpu_uuid,pid,used_memory"
CSV = "--format=csv,noheader,nounits"
QUERY_TIMEOUT = 20.0
USAGE = "--node=NODE --log-dir=DIR [--ports=P,...] [--gpus=I,...] [--memory-fraction=F] [--gpu-query=PROGRAM]"
OPTIONS = ("--node", "--log-dir", "--ports", "--gpus", "--memory-fraction", "--gpu-query")


class Verdict:
    """The first failing check and its evidence (ok when none failed), and notes."""

    def __init__(self) -> None:
        self.ok = True
        self.check: str | None = None
        self.evidence: str | None = None
        self.notes: list[str] = []

    def fail(self, check: str, evidence: str) -> None:
        if self.ok:
            self.ok, self.check, self.evidence = False, check, evidence

    def line(self) -> str:
        """`json.dumps` of `{"ok", "check", "evidence", "notes"}`, byte for byte (its defaults:
        ensure_ascii, `", "` and `": "`), without loading json (and re with it)."""
        fields = {"ok": self.ok, "check": self.check, "evidence": self.evidence, "notes": self.notes}
        return "{" + ", ".join(f"{_quote(key)}: {_value(value)}" for key, value in fields.items()) + "}"


def _value(value: bool | str | list[str] | None) -> str:
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_quote, value)) + "]"
    return "null" if value is None else "true" if value else "false"


class QueryFailed(Exception):
    pass


def _query(command: list[str], flag: str, node: str) -> list[list[str]] | None:
    """The CSV rows of one query; None when the program is not there."""
    import os  # only a GPU query runs a program
    import shlex
    import subprocess

    try:
        done = subprocess.run(
            [*command, flag, CSV],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SRTD_NODE": node},
        )
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        raise QueryFailed(f"{shlex.join(command)} {flag} gave no answer within {QUERY_TIMEOUT:g} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise QueryFailed(f"{shlex.join(command)} {flag} exited {done.returncode}: {said[-1] if said else ''}")
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line.strip()]


def _log_dir(verdict: Verdict, path: str) -> None:
    name = f".srtd-preflight-{posix.getpid()}-{posix.urandom(4).hex()}"
    probe = f"{path}/{name}" if path and not path.endswith("/") else path + name  # as os.path.join
    try:
        posix.close(posix.open(probe, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL | posix.O_NOFOLLOW, 0o600))
        posix.unlink(probe)
    except OSError as err:
        verdict.fail("log-dir", f"cannot create a file in {path}: {err.strerror or err}")


def _ports(verdict: Verdict, ports: list[int]) -> None:
    taken = []
    for port in ports:
        sock = socket(AF_INET, SOCK_STREAM)
        try:
            sock.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", port))
        except OSError:
            taken.append(str(port))
        finally:
            sock.close()
    if taken:
        verdict.fail("ports", f"port{'s' if len(taken) > 1 else ''} {', '.join(taken)} already in use")


def _gpus(verdict: Verdict, command: list[str], node: str, wanted: list[int], fraction: float) -> None:
    try:
        gpus = _query(command, GPU_FIELDS, node)
        apps = _query(command, APP_FIELDS, node) if gpus is not None else None
    except QueryFailed as err:
        verdict.fail("gpus-visible", str(err))
        return
    if gpus is None or apps is None:
        verdict.notes.append(f"GPU checks skipped: {command[0]} not found")
        return
    seen = {int(row[0]): row for row in gpus if len(row) >= 4 and row[0].isdigit()}
    wanted = wanted or sorted(seen)
    missing = [str(i) for i in wanted if i not in seen]
    if missing:
        verdict.fail("gpus-visible", f"GPU {', '.join(missing)} not listed ({len(seen)} visible)")
        return
    uuids = {seen[i][1]: i for i in wanted}
    foreign = [f"pid {row[1]} holds {row[2]} MiB on GPU {uuids[row[0]]}" for row in apps if row[0] in uuids]
    if foreign:
        verdict.fail("gpus-foreign", "; ".join(foreign))
        return
    short = [
        f"GPU {i} has {seen[i][3]} MiB free of {seen[i][2]} MiB, the engine asks for {fraction:g}"
        for i in wanted
        if fraction and float(seen[i][3]) < fraction * float(seen[i][2])
    ]
    if short:
        verdict.fail("gpus-memory", "; ".join(short))


def check(node: str, log_dir: str, ports: list[int], gpus: list[int], fraction: float, query: str) -> Verdict:
    verdict = Verdict()
    _log_dir(verdict, log_dir)
    _ports(verdict, ports)
    if query:
        import shlex  # only a GPU query is split

        _gpus(verdict, shlex.split(query), node, gpus, fraction)
    return verdict


def _usage(message: str) -> SystemExit:
    """A bad command line: one line on stderr, and exit 2, as argparse would."""
    print(f"_node_check.py: error: {message} (usage: {USAGE})", file=sys.stderr)
    return SystemExit(2)


def _numbers(name: str, text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part]
    except ValueError:
        raise _usage(f"argument {name}: invalid int list: {text!r}") from None


def options(argv: list[str]) -> tuple[str, str, list[int], list[int], float, str]:
    """`check`'s arguments from `--name=value` or `--name value` options (the last of a name counts)."""
    given: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            print(f"usage: _node_check.py {USAGE}")
            raise SystemExit(0)
        name, equals, value = arg.partition("=")
        if name not in OPTIONS:
            raise _usage(f"unrecognized arguments: {arg}")
        if not equals:
            value = next(args, "--")
            if value.startswith("--"):  # none left, or the next option
                raise _usage(f"argument {name}: expected one argument")
        given[name] = value
    missing = [name for name in OPTIONS[:2] if name not in given]
    if missing:
        raise _usage(f"the following arguments are required: {', '.join(missing)}")
    try:
        fraction = float(given.get("--memory-fraction", 0.0))
    except ValueError:
        raise _usage(f"argument --memory-fraction: invalid float value: {given['--memory-fraction']!r}") from None
    ports, gpus = _numbers("--ports", given.get("--ports", "")), _numbers("--gpus", given.get("--gpus", ""))
    return given["--node"], given["--log-dir"], ports, gpus, fraction, given.get("--gpu-query", "")


def main(argv: list[str] | None = None) -> None:
    verdict = check(*options(sys.argv[1:] if argv is None else argv))
    print(verdict.line())


if __name__ == "__main__":
    main()
