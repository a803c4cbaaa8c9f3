"""How the cloud's HTTP server is run: uvicorn with limits a slow or idle client
cannot outlast.

Invariants:
- A connection that has not sent a whole request head (request line and headers)
  within ``ServerLimits.header_timeout`` seconds of connecting, or of its previous
  answer, is closed; a body must arrive within ``body_timeout`` (``cloud.app``
  answers 408). An idle kept-alive connection is closed after ``keep_alive``.
- A request head over ``max_head_bytes`` is refused by h11 (400); at most
  ``max_connections`` connections and requests at once (uvicorn answers 503 beyond);
  the listen backlog is ``backlog``.
- What h11 cannot parse (a non-numeric or negative Content-Length, two different
  lengths, a malformed request line) is answered 400 in the project's JSON
  ``ErrorBody`` (``malformed_request``), not uvicorn's plain text; the connection is
  closed after it.
- ``memsync cloud serve`` and the testers' ``RunningCloud`` build their server here,
  so the limits tested are the limits served.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from cloud.server_limits import ServerLimits
from protocol.messages import ErrorBody, ErrorCode
from protocol.version import LOWEST_VERSION
from protocol.versioned import render_json


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for each request head: armed when the
    connection opens and whenever a new request begins to arrive, cancelled when h11
    has the whole head; when it passes, the connection is closed."""

    head_timeout: float = ServerLimits.header_timeout

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            if self._head_deadline is None:
                self._arm()  # a new request began on a kept-alive connection
        else:
            self._disarm()  # the head is in (or the connection is done)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # the keep-alive timer takes over until the next byte

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        body = ErrorBody(
            code=ErrorCode.MALFORMED_REQUEST,
            message=f"the HTTP request could not be read ({msg.rstrip('.')}); nothing was changed",
        )
        data = render_json(body, LOWEST_VERSION).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
            (b"connection", b"close"),
        ]
        try:
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=data),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # h11 cannot answer in this state: just close
            pass
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        deadline = getattr(self, "_head_deadline", None)
        if deadline is not None:
            deadline.cancel()
        self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def protocol_for(limits: ServerLimits) -> type[HeadTimeoutProtocol]:
    return type(
        "LimitedH11Protocol", (HeadTimeoutProtocol,), {"head_timeout": limits.header_timeout}
    )


def server_config(app: Any, limits: ServerLimits, **options: Any) -> uvicorn.Config:
    """A uvicorn config for ``app`` with ``limits`` (``options``: host, port, logging)."""
    return uvicorn.Config(
        app,
        http=protocol_for(limits),
        timeout_keep_alive=int(max(1, round(limits.keep_alive))),
        h11_max_incomplete_event_size=limits.max_head_bytes,
        limit_concurrency=limits.max_connections,
        backlog=limits.backlog,
        **options,
    )
