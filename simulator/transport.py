"""The simulator's side of the device's one transport seam.

Invariant: faults happen only here, at the httpx transport, so the device's real
sync code runs unchanged. ``online = False`` makes every request fail to connect,
exactly like a phone in airplane mode.
"""

from __future__ import annotations

import httpx


class SwitchableTransport(httpx.BaseTransport):
    """Wraps a real transport; can be taken offline and back."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.online = True
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not self.online:
            raise httpx.ConnectError("device is offline (simulated)", request=request)
        self.requests += 1
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()
