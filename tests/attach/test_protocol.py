"""Request parsing and the runtime directory, without a job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from srtd.attach._paths import private_dir, socket_path
from srtd.attach._protocol import BadRequest, Request, parse_request
from srtd.errors import AttachError
from srtd.runtime import runtime_dir


def test_requests_are_parsed_with_their_defaults() -> None:
    assert parse_request(b'{"cmd": "snapshot"}') == Request(cmd="snapshot")
    assert parse_request(b'{"cmd": "subscribe", "from_seq": 12, "id": "a"}') == Request(
        cmd="subscribe", id="a", from_seq=12
    )
    assert parse_request(b'{"cmd": "tail", "unit": "w0", "lines": 5, "follow": true}') == Request(
        cmd="tail", unit="w0", lines=5, follow=True
    )
    assert parse_request(b'{"cmd": "signal", "unit": "w0", "signal": 1}') == Request(
        cmd="signal", unit="w0", signal="1"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"", "not a JSON object"),
        (b"\xff\xfe", "not a JSON object"),
        (b"[]", "not a JSON object"),
        (b'"snapshot"', "not a JSON object"),
        (b'{"cmd": 1}', "unknown cmd 1; one of snapshot, subscribe, tail, stop, restart, signal"),
        (b'{"cmd": "tail"}', "tail needs a unit name"),
        (b'{"cmd": "signal", "unit": "w0"}', "signal needs a signal name or number"),
        (b'{"cmd": "tail", "unit": "w0", "lines": 10001}', "lines must be an integer from 0 to 10000"),
        (b'{"cmd": "tail", "unit": "w0", "lines": true}', "lines must be an integer from 0 to 10000"),
        (b'{"cmd": "tail", "unit": "w0", "follow": 1}', "follow must be true or false"),
        (b'{"cmd": "stop", "id": [1]}', "id must be a string or an integer"),
        (b'{"cmd": "stop", "x": NaN}', "not a JSON object"),
        (b'{"cmd": "stop", "x": ' + b"[" * 32 + b"]" * 32 + b"}", "nested deeper than 32 levels"),
        (b"[" * 100_000, "nested deeper than 32 levels"),
    ],
)
def test_bad_requests_say_what_is_wrong(line: bytes, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_request(line)
    assert str(info.value) == message


def test_nesting_up_to_the_bound_is_a_request() -> None:
    line = b'{"cmd": "stop", "x": ' + b"[0, " * 30 + b"{}" + b"]" * 30 + b"}"  # the object itself is level 1
    assert parse_request(line).cmd == "stop"


def test_the_runtime_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRTD_RUNTIME_DIR", "/x/rt")
    assert runtime_dir() == Path("/x/rt")
    monkeypatch.delenv("SRTD_RUNTIME_DIR")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert runtime_dir() == Path("/run/user/7/srtd")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert runtime_dir() == Path(f"/tmp/srtd-{os.getuid()}")


def test_the_runtime_directory_is_private(tmp_path: Path) -> None:
    mine = tmp_path / "rt"
    assert private_dir(mine) == mine
    assert oct(mine.stat().st_mode & 0o777) == "0o700"
    mine.chmod(0o755)  # the user's own choice: readable by others, writable by nobody else
    private_dir(mine)
    assert oct(mine.stat().st_mode & 0o777) == "0o755"  # not srtd's to chmod
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(AttachError) as info:
            private_dir(theirs)
        assert str(info.value) == f"{theirs} is not a directory owned by uid 0; refusing to put a socket there"


def test_socket_names_are_safe_and_short(tmp_path: Path) -> None:
    assert socket_path("1234", tmp_path) == tmp_path / "1234.sock"
    assert socket_path("a/../b c", tmp_path) == tmp_path / "a_.._b_c.sock"
    with pytest.raises(AttachError) as info:
        socket_path("x" * 200, tmp_path)
    assert "longer than 107 bytes; set SRTD_RUNTIME_DIR shorter" in str(info.value)
