"""The node presence check's decision: lost after `lost_after` s without one answered connect."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from srtd.launch._presence import HURRY_LOST, NodePresence, connect_error


async def _closed_port() -> int:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    return port


@pytest.mark.anyio
async def test_a_node_whose_slurmd_refuses_is_lost_once_after_the_bound_and_a_live_one_never() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    alive = listener.extra(anyio.abc.SocketAttribute.local_port)
    dead = await _closed_port()
    now = [0.0]
    lost: list[tuple[str, str]] = []
    presence = NodePresence(
        {"node1": ("127.0.0.1", alive), "node2": ("127.0.0.1", dead)},
        interval=3,
        lost_after=10,
        on_lost=lambda node, why: lost.append((node, why)),
        now=lambda: now[0],
    )
    presence._last_ok = {"node1": 0.0, "node2": 0.0}
    async with listener:
        for t in (3.0, 6.0, 9.0, 12.0, 15.0):
            now[0] = t
            await presence.check("node1")
            await presence.check("node2")
            if t < 10:
                assert lost == []
    assert lost == [("node2", f"slurmd at 127.0.0.1:{dead} has not answered for 12 s: Connection refused")]
    assert presence.lost == {"node2": lost[0][1]}


@pytest.mark.anyio
async def test_connect_error_says_what_went_wrong() -> None:
    assert await connect_error("127.0.0.1", await _closed_port()) == "Connection refused"


@pytest.mark.anyio
async def test_a_hurried_node_is_decided_within_the_hurry_bound_and_a_live_one_is_left_alone() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    alive = listener.extra(anyio.abc.SocketAttribute.local_port)
    dead = await _closed_port()
    lost: list[str] = []
    presence = NodePresence(
        {"node1": ("127.0.0.1", alive), "node2": ("127.0.0.1", dead)},
        interval=3,
        lost_after=10,
        on_lost=lambda node, why: lost.append(node),
    )
    async with listener:
        began = anyio.current_time()
        presence._last_ok = {"node1": began, "node2": began}
        await presence.hurry("node1")
        assert anyio.current_time() - began < 1  # it answered the first connect: nothing to hurry
        await presence.hurry("node2")
        took = anyio.current_time() - began
    assert lost == ["node2"]
    assert HURRY_LOST <= took < HURRY_LOST + 2  # not the 10 s of `lost_after`
    assert presence.lost["node2"].endswith(": Connection refused")
