"""How srtd opens the files it writes and the files it reads back (docs/security.md).

A log directory is shared with whatever else can write into it, so a name in it may
already be a symbolic link, a FIFO or a device when srtd comes to write it.  Every write
below a log directory goes through `open_under` (a stream: the journal, a unit's log) or
`write_under` (a whole file, replaced in one step): directories are walked from the log
directory one component at a time and never through a link, the final name is opened
with `O_NOFOLLOW` and `O_NONBLOCK` (a FIFO cannot block the open) and anything but a
regular file is refused.  A file the user named (`migrate -o`, `results --plot`) is
written with `write_target`: the same checks on its final name.

What srtd reads back (a journal, results.json, a saved plan) goes through `read_back`:
a regular file only, opened without blocking, read up to its own size and never more
than a limit per kind, so `/dev/zero`, a FIFO or `/proc/kmsg` cannot make a reader hang
or read without end.  A refusal is the caller's error class (`LaunchError` for a
write, exit 3; a reader's own error for what it reads), one line naming the file.
Like `srtd.events`, this module imports nothing of srtd's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from pathlib import Path

# What a reader takes at most of each kind of file (docs/security.md).
JOURNAL_LIMIT = 256 << 20  # events.jsonl: a long job's journal is a few MiB
OUTPUT_LIMIT = 16 << 20  # results.json, a tool's output read whole (a results reader, srun's messages)
PLAN_LIMIT = 64 << 20  # a saved plan.json (thousands of units)
SMALL_LIMIT = 1 << 20  # the attach pointer, a step's record, a power manifest

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refusal(path: Path | str, mode: int, error: type[Exception]) -> Exception:
    return error(f"{path}: is {_kind(mode)}, not a regular file; refusing it")


def _open(path: Path | str, flags: int, error: type[Exception], *, dir_fd: int | None = None, name: str = "") -> int:
    """An open file descriptor of a regular file, in blocking mode; `error` for anything else."""
    try:
        fd = os.open(name or path, flags, 0o644, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise error(f"{path}: is a symbolic link; srtd does not follow links here") from None
        if err.errno == errno.ENXIO:  # a FIFO without a reader, opened for writing
            raise error(f"{path}: is a FIFO, not a regular file; refusing it") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _refusal(path, mode, error)
    os.set_blocking(fd, True)
    return fd


def _relative_parts(root: Path, path: Path, error: type[Exception]) -> list[str]:
    base, full = os.path.abspath(root), os.path.abspath(path)
    rel = os.path.relpath(full, base)
    if rel in {".", ".."} or rel.startswith("../"):
        raise error(f"{path}: is outside the log directory {root}")
    return rel.split("/")


def _walk(root: Path, path: Path, error: type[Exception]) -> tuple[int, str]:
    """A descriptor of `path`'s directory (made where missing) and its final name.

    `root` itself may be a link (the user chose it); nothing below it is followed.
    """
    *dirs, name = _relative_parts(root, path, error)
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, _DIR)
    try:
        for i, part in enumerate(dirs):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                sub = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                where = Path(root, *dirs[: i + 1])
                raise error(f"{where}: is not a directory (a link or a file); refusing to write {path}") from None
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def open_under(root: Path, path: Path, *, append: bool = False, keep: bool = False, error: type[Exception]) -> int:
    """A descriptor to write `path`, inside `root`: emptied first unless `keep`, `O_APPEND` with `append`."""
    dir_fd, name = _walk(root, path, error)
    try:
        fd = _open(path, _WRITE | os.O_NOFOLLOW | (os.O_APPEND if append else 0), error, dir_fd=dir_fd, name=name)
    finally:
        os.close(dir_fd)
    if not keep:
        os.ftruncate(fd, 0)
    return fd


def check_under(root: Path, path: Path, *, error: type[Exception]) -> None:
    """`path`'s directories inside `root` made through no link, and nothing but a regular
    file (or nothing) at its name; whoever writes it opens it with `open_file`."""
    dir_fd, name = _walk(root, path, error)
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    finally:
        os.close(dir_fd)
    if stat.S_ISLNK(mode):
        raise error(f"{path}: is a symbolic link; srtd does not follow links here")
    if not stat.S_ISREG(mode):
        raise _refusal(path, mode, error)


def open_file(path: Path, *, append: bool = False, keep: bool = False, error: type[Exception]) -> int:
    """`open_under` for a file whose directory srtd trusts: only its final name is checked."""
    fd = _open(path, _WRITE | os.O_NOFOLLOW | (os.O_APPEND if append else 0), error)
    if not keep:
        os.ftruncate(fd, 0)
    return fd


def _replace_at(dir_fd: int, name: str, path: Path, data: bytes, error: type[Exception]) -> None:
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise error(f"{path}: is {_kind(old.st_mode)}; srtd replaces only a regular file")
    mode = stat.S_IMODE(old.st_mode) if old is not None else 0o644
    tmp = f".{name}.{os.urandom(4).hex()}.srtd-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def write_under(root: Path, path: Path, data: bytes | str, *, error: type[Exception]) -> None:
    """Replace `path`, inside `root`, in one step: a reader sees the old content or the new."""
    dir_fd, name = _walk(root, path, error)
    try:
        _replace_at(dir_fd, name, path, _bytes(data), error)
    finally:
        os.close(dir_fd)


def write_target(path: Path, data: bytes | str, *, error: type[Exception]) -> None:
    """Replace the file the user named in one step; a link, a FIFO or a device there is refused."""
    if path.name in ("", ".", ".."):
        raise error(f"{path}: names a directory, not a file")
    dir_fd = os.open(path.parent, _DIR)
    try:
        _replace_at(dir_fd, path.name, path, _bytes(data), error)
    finally:
        os.close(dir_fd)


def open_read(path: Path, *, follow: bool = True, error: type[Exception]) -> int:
    """A descriptor to read the regular file `path` (without `follow`, its final name is no link)."""
    return _open(path, _READ | (0 if follow else os.O_NOFOLLOW), error)


def read_back(path: Path, *, limit: int, error: type[Exception], follow: bool = True) -> bytes:
    """The bytes of a regular file, up to its size as it was opened; `error` above `limit`.

    A file of the proc file system says it has size 0 and is read as empty.
    """
    fd = open_read(path, follow=follow, error=error)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise error(f"{path}: larger than {_size(limit)} ({_size(size)}); not a file srtd wrote")
        chunks: list[bytes] = []
        left = size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_back(path: Path, *, limit: int, error: type[Exception], follow: bool = True) -> str:
    """`read_back`, decoded as UTF-8; `error` naming the first byte that is not."""
    data = read_back(path, limit=limit, error=error, follow=follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte {err.start})") from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def within(log_dir: str, path: str) -> bool:
    """Whether `path` (as written: absolute, or relative to the working directory) is inside `log_dir`.

    Lexical on purpose: a plan is checked before any file exists, and every path srtd
    writes is made from the log directory and a name, so a `..` or `/` in the name is
    what would take it out.
    """
    base = posixpath.normpath(os.path.abspath(log_dir))
    full = posixpath.normpath(os.path.abspath(path))
    return full.startswith(base.rstrip("/") + "/")
