"""Both log watchers deliver lines: inotify (local) and the adaptive stat-poll (fallback)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from srtd.errors import UsageError
from srtd.launch import FakeLauncher
from srtd.supervisor import Job
from srtd.supervisor._tail import LogLine, Tailer
from srtd.supervisor._watch import WATCH_ENV, InotifyWatcher, LogWatcher, PollWatcher, open_watcher, watch_mode
from srtd.unit import Plan, Unit, UnitKind

WATCHERS = {"inotify": InotifyWatcher, "poll": PollWatcher}


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


@contextlib.asynccontextmanager
async def running(watcher: LogWatcher, *tailers: Tailer) -> AsyncIterator[None]:
    """The watcher's loop runs inside; everything is closed after."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            yield
            tg.cancel_scope.cancel()
    finally:
        for tailer in tailers:
            tailer.close()
        watcher.close()


async def _next(stream: anyio.abc.ObjectReceiveStream[LogLine]) -> LogLine:
    with anyio.fail_after(10):  # a generous bound: a missed line hangs, a slow machine does not fail
        return await stream.receive()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(WATCHERS))
async def test_watcher_delivers_lines_of_new_rotated_and_truncated_files(tmp_path: Path, kind: str) -> None:
    watcher: LogWatcher = WATCHERS[kind]()
    path = tmp_path / "logs" / "unit.log"
    path.parent.mkdir()
    quiet = Tailer(tmp_path / "logs" / "other.log")
    tailer = Tailer(path)
    stream = tailer.subscribe()
    async with running(watcher, tailer, quiet):
        watcher.add(quiet)
        watcher.add(tailer)  # the file does not exist yet
        await anyio.sleep(0.05)
        _append(path, b"hello\n")
        assert await _next(stream) == LogLine("hello", 0)
        _append(path, b"partial")
        _append(path, b" line\nsecond\n")
        assert await _next(stream) == LogLine("partial line", 0)
        assert await _next(stream) == LogLine("second", 0)
        tailer.rotate(tmp_path / "logs" / "unit.log.1")  # what a restart does
        _append(path, b"attempt 2\n")
        assert await _next(stream) == LogLine("attempt 2", 1)
        path.write_bytes(b"")  # truncated in place
        _append(path, b"x\n")
        assert await _next(stream) == LogLine("x", 2)


@pytest.mark.anyio
async def test_inotify_watcher_polls_a_log_whose_directory_cannot_be_watched(tmp_path: Path) -> None:
    watcher = InotifyWatcher()
    path = tmp_path / "later" / "unit.log"  # no such directory when the tailer is added
    tailer = Tailer(path)
    stream = tailer.subscribe()
    async with running(watcher, tailer):
        watcher.add(tailer)
        path.parent.mkdir()
        _append(path, b"seen by the poll\n")
        assert await _next(stream) == LogLine("seen by the poll", 0)


def test_watch_modes() -> None:
    assert watch_mode(None) == "auto"
    assert watch_mode("poll") == "poll"
    with pytest.raises(ValueError, match="one of auto, inotify, poll, not 'nfs'"):
        watch_mode("nfs")
    assert isinstance(open_watcher("poll"), PollWatcher)
    watcher = open_watcher("auto")
    assert isinstance(watcher, InotifyWatcher)  # Linux CI: inotify is there
    watcher.close()


def _job(launcher: FakeLauncher, **kw: object) -> Job:
    unit = Unit(name="a", kind=UnitKind.SERVICE, phase="p", nodes=("n1",), argv=("fake",), log="a.log")
    plan = Plan(
        name="w", job_id="1", log_dir="/nonexistent", nodes={}, allocation=("n1",), phases=("p",), units=(unit,)
    )
    return Job(plan, launcher, **kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_the_watch_mode_comes_from_the_caller_the_environment_or_the_launcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(WATCH_ENV, raising=False)
    assert _job(FakeLauncher()).log_watch == "auto"
    on_shared_fs = FakeLauncher()
    on_shared_fs.log_watch = "poll"  # type: ignore[attr-defined]  # what a Slurm launcher says
    assert _job(on_shared_fs).log_watch == "poll"
    monkeypatch.setenv(WATCH_ENV, "inotify")
    assert _job(on_shared_fs).log_watch == "inotify"
    assert _job(on_shared_fs, log_watch="poll").log_watch == "poll"
    monkeypatch.setenv(WATCH_ENV, "nfs")
    with pytest.raises(UsageError, match=r"\$SRTD_LOG_WATCH: log watch mode must be one of auto, inotify, poll"):
        _job(FakeLauncher())
