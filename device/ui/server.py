"""Serving the inspector: uvicorn on 127.0.0.1 in a thread, for the CLI and for tests.

Invariants: the socket binds 127.0.0.1 only (a random free port for port 0); the
token is 32 bytes of the agent's injected randomness, url-safe; the CSRF secret is
another 32; the app checks the Host header against the bound port; ``serve_ui``
returns once the socket listens and stops the server (and waits for it) on exit.
"""

from __future__ import annotations

import base64
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from device.agent import DeviceAgent
from device.ui.app import create_app

HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class UiServer:
    url: str  # the one link to open: base + "/?token=" + token
    token: str
    base: str  # http://127.0.0.1:<port>

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])


def new_token(agent: DeviceAgent) -> str:
    return base64.urlsafe_b64encode(agent.random_bytes(32)).decode().rstrip("=")


@contextmanager
def serve_ui(agent: DeviceAgent, *, port: int = 0) -> Iterator[UiServer]:
    """Serve the inspector over ``agent`` on 127.0.0.1:``port`` (0: a free one) for the
    duration of the ``with`` block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind((HOST, port))
        sock.listen(64)
        bound = int(sock.getsockname()[1])
        token = new_token(agent)
        app = create_app(agent, token, csrf_secret=agent.random_bytes(32), port=bound)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="memsync-inspector", daemon=True
        )
        thread.start()
        base = f"http://{HOST}:{bound}"
        try:
            yield UiServer(url=f"{base}/?token={token}", token=token, base=base)
        finally:
            server.should_exit = True
            thread.join(timeout=30)
    finally:
        sock.close()
