"""A second local account for the Slurm tests ("another user"), and srtd run as it.

The account `srtd-other` is created the first time it is needed (as root, idempotent:
`useradd` only when `id` does not know it); CI runs as root on a clean machine.  srtd
runs as it in a forked child that drops to its uid after the CLI is imported, so the
checkout and the venv need not be readable by that user (a clone under /root is not).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import pwd
import subprocess
import sys

import anyio._core

OTHER_USER = "srtd-other"

# What the CLI imports lazily, loaded before the child drops root (the files may be unreadable to it).
_PRELOAD = (
    "srtd.cli._commands",
    "srtd.attach._client",
    "srtd.attach._jobs",
    "srtd.attach._relay",
    "srtd.attach._view",
    "srtd.launch._queue",
    "srtd.launch._tool",
    "srtd.events",
    "srtd.supervisor",
    "rich.console",
    "rich.table",
    "rich.live",
    "anyio._backends._asyncio",
)


def other_user() -> pwd.struct_passwd:
    """The second account, created when missing."""
    try:
        return pwd.getpwnam(OTHER_USER)
    except KeyError:
        pass
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(OTHER_USER)


def srtd_as(user: pwd.struct_passwd, *args: str) -> tuple[int, str, str]:
    """`srtd ARGS` run as `user`: (exit code, stdout, stderr)."""
    for module in _PRELOAD:
        importlib.import_module(module)
    # anyio imports some of its own modules lazily, on first use: the child could not read them.
    for info in pkgutil.iter_modules(anyio._core.__path__, "anyio._core."):
        importlib.import_module(info.name)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, run the CLI, leave without cleanup
        code = 70
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (the child ends with os._exit)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.chdir("/")
            for name in ("SRTD_RUNTIME_DIR", "XDG_RUNTIME_DIR"):
                os.environ.pop(name, None)
            os.environ.update(HOME="/", USER=user.pw_name, LOGNAME=user.pw_name)
            from srtd.cli._main import cli

            try:
                cli.main(args=list(args), prog_name="srtd")
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:
            print(f"test child: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    with os.fdopen(out_r, "rb") as out, os.fdopen(err_r, "rb") as err:
        stdout = out.read().decode()
        stderr = err.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), stdout, stderr
