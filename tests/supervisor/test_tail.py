from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from srtd.supervisor import LogLine, Tailer, read_tail


class Collect:
    def __init__(self, tailer: Tailer) -> None:
        self.lines: list[LogLine] = []
        self._cm = tailer.watch(self.lines.append)
        self._cm.__enter__()

    @property
    def texts(self) -> list[str]:
        return [line.text for line in self.lines]


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_missing_file_is_nothing_yet(tmp_path: Path) -> None:
    tailer = Tailer(tmp_path / "x.log")
    got = Collect(tailer)
    tailer.poll()
    assert got.lines == []
    _append(tmp_path / "x.log", b"first\n")
    tailer.poll()
    assert got.texts == ["first"]


def test_only_complete_lines_and_only_new_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path)
    got = Collect(tailer)
    _append(path, b"one\ntw")
    tailer.poll()
    assert got.texts == ["one"]
    tailer.poll()
    assert got.texts == ["one"]  # nothing appended: nothing new
    _append(path, b"o\r\nthree\n\nfour")
    tailer.poll()
    assert got.texts == ["one", "two", "three", ""]
    _append(path, b"\n")
    tailer.poll()
    assert got.texts == ["one", "two", "three", "", "four"]


def test_partial_line_buffer_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path, max_partial=10, chunk=4)
    got = Collect(tailer)
    _append(path, b"x" * 100 + b"tail-end")
    tailer.poll()
    assert got.lines == []
    _append(path, b"\n")
    tailer.poll()
    assert got.texts == ["xxtail-end"]  # the newest 10 bytes of the unterminated line


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path)
    got = Collect(tailer)
    _append(path, b"bad \xff byte\n")
    tailer.poll()
    assert got.texts == ["bad \ufffd byte"]


def test_truncation_reads_from_the_start_again(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path)
    got = Collect(tailer)
    _append(path, b"old line one\nold line two\n")
    tailer.poll()
    with open(path, "wb") as f:  # truncate in place (copytruncate, or a restart writing fresh)
        f.write(b"new\n")
    tailer.poll()
    assert got.texts == ["old line one", "old line two", "new"]
    assert [line.generation for line in got.lines] == [0, 0, 1]


def test_rotation_drains_the_old_file_then_follows_the_new(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path)
    got = Collect(tailer)
    _append(path, b"a\n")
    tailer.poll()
    _append(path, b"b\nunterminated")  # written before the rotation, not yet read
    os.rename(path, tmp_path / "x.log.1")
    tailer.poll()  # renamed away, no new file yet: keeps following the old one
    assert got.texts == ["a", "b"]
    _append(path, b"c\n")
    tailer.poll()
    assert got.texts == ["a", "b", "unterminated", "c"]
    assert [line.generation for line in got.lines] == [0, 0, 0, 1]


def test_rotate_renames_and_starts_a_new_generation(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path)
    got = Collect(tailer)
    _append(path, b"crash: boom\nlast words")
    tailer.rotate(tmp_path / "x.log.1")
    assert (tmp_path / "x.log.1").read_bytes() == b"crash: boom\nlast words"
    assert not path.exists()
    assert got.texts == ["crash: boom", "last words"]
    assert tailer.generation == 1
    _append(path, b"fresh\n")
    tailer.poll()
    assert got.lines[-1] == LogLine("fresh", 1)


def test_a_slow_subscriber_is_dropped_not_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path)
    slow = tailer.subscribe(max_buffer=2)
    _append(path, b"1\n2\n3\n4\n")
    tailer.poll()
    received = [slow.receive_nowait().text, slow.receive_nowait().text]
    assert received == ["1", "2"]
    with pytest.raises(anyio.EndOfStream):
        slow.receive_nowait()


def test_read_tail(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"".join(f"line {i}\n".encode() for i in range(100)))
    assert read_tail(path, 3) == ["line 97", "line 98", "line 99"]
    assert read_tail(path, 3, max_bytes=20) == ["line 98", "line 99"]
    assert read_tail(tmp_path / "missing.log") == []


def test_a_burst_is_read_in_slices(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    tailer = Tailer(path, chunk=4)
    got = Collect(tailer)
    _append(path, b"aaaa\nbbbb\ncccc\n")
    assert tailer.poll(limit=8) is True
    assert got.texts == ["aaaa"]
    assert tailer.poll(limit=8) is False
    assert got.texts == ["aaaa", "bbbb", "cccc"]
