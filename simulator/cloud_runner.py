"""A real cloud for testers: the FastAPI app under uvicorn on an ephemeral loopback port.

Invariants: the server binds 127.0.0.1 only; ``start`` returns once the socket is
listening (connections queue in its backlog), and ``stop`` waits for the server to end.
A restart builds a new app (a new ``CloudService``) on the same stores and the same
port, as a new process would; the operator handle stays open across restarts.
Accepted connections have Nagle's algorithm off, as under ``uvicorn.run``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import uvicorn

from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.server import server_config
from cloud.server_limits import ServerLimits
from cloud.service import CloudService


class RunningCloud:
    """A cloud service serving HTTP on loopback, plus an operator handle on its stores."""

    def __init__(self, config: CloudConfig, *, limits: ServerLimits | None = None) -> None:
        self.config = config
        self.limits = limits or ServerLimits()  # what ``memsync cloud serve`` applies
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0
        self._starts = 0
        self.operator = CloudService(config)
        self.service: CloudService | None = None  # the running app's, once started

    @classmethod
    def sqlite(cls, folder: Path, *, clock: Callable[[], datetime] | None = None) -> RunningCloud:
        """A cloud on SQLite files in ``folder``; ``clock`` is the cloud's own clock."""
        folder.mkdir(parents=True, exist_ok=True)
        config = CloudConfig(
            store_url=f"sqlite:///{folder / 'records.db'}", key_store_path=folder / "keys.db"
        )
        if clock is not None:
            config = replace(config, clock=clock)
        return cls(config)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def urls(self) -> list[str]:
        """Every URL this cloud serves on (one process: one URL)."""
        return [self.url]

    @property
    def restarts(self) -> int:
        return self._starts - 1 if self._starts else 0

    def start(self) -> RunningCloud:
        # proto IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) on accepted
        # sockets only when their proto says TCP; with Nagle on, every request on a
        # kept-alive connection waited ~40 ms for the client's delayed ACK
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        app = create_app(self.config)
        self.service = app.state.service  # the serving process's own service (its indexer)
        config = server_config(
            app, self.limits, log_level="warning", lifespan="on", access_log=False
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="memsync-cloud", daemon=True
        )
        thread.start()
        self._server, self._thread, self._socket = server, thread, sock
        self._starts += 1
        return self

    def settle(self, timeout: float = 120.0) -> None:
        """Wait until the serving service's post-commit indexer has nothing owed and
        nothing running (a condition, not a sleep): what is read after this is what the
        cloud's own background work left, not a moment in the middle of it."""
        if self.service is not None and not self.service.indexer.wait_idle(timeout):
            raise TimeoutError(f"the cloud's indexer was still busy after {timeout:g} s")

    def stop(self, *, force: bool = False) -> None:
        """End the server: gracefully, or at once (``force``: requests in flight are cut)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._server.force_exit = force
            self._thread.join(timeout=30)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def restart(self, *, force: bool = False) -> None:
        """Stop and start again on the same port, as after a crash of the process."""
        self.stop(force=force)
        self.start()

    def close(self) -> None:
        self.stop()
        self.operator.close()

    def __enter__(self) -> RunningCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
