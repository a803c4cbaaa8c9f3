"""RunningCloud's listening socket: accepted connections must get TCP_NODELAY.

asyncio sets TCP_NODELAY on an accepted socket only when its ``proto`` is
``IPPROTO_TCP`` (accepted sockets inherit the listener's). A listener made with proto 0
left Nagle on, and every request on a kept-alive connection waited ~40 ms for the
client's delayed ACK (found by ``bench/fleet.py``).
"""

from __future__ import annotations

import asyncio.base_events
import socket
from pathlib import Path

import httpx
import pytest

from simulator.cloud_runner import RunningCloud


def test_listener_is_tcp_so_accepted_connections_turn_nagle_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    original = asyncio.base_events._set_nodelay  # type: ignore[attr-defined]

    def spy(sock: socket.socket) -> None:
        original(sock)
        seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(asyncio.base_events, "_set_nodelay", spy)
    with RunningCloud.sqlite(tmp_path) as cloud:
        assert cloud._socket is not None and cloud._socket.proto == socket.IPPROTO_TCP
        with httpx.Client(base_url=cloud.url) as client:
            assert client.get("/v1/health").status_code == 200
            assert client.get("/v1/health").status_code == 200
    assert seen and all(seen), f"accepted connections had TCP_NODELAY {seen}"
