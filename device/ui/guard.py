"""The inspector's security checks: the run's sessions, the Host check and the
security headers on every answer, and the same-origin test for a POST.

Invariants: session ids and CSRF tokens come from the injected randomness, and every
token is compared in constant time; a request for another host is answered 403 before
anything is read; every answer, refusals included, carries ``SECURITY_HEADERS``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from device.ui.rendering import page as _page

RandomBytes = Callable[[int], bytes]

COOKIE = "memsync_ui"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with
    # every form POST (Fetch, "serializing a request origin"), and the CSRF check needs
    # the real origin; no referrer ever leaves for another site either way
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
INVALID_LINK = "This inspector link is not valid (open the link memsync printed)"

# --- sessions and the security checks -------------------------------------------------


@dataclass(slots=True)
class Session:
    csrf: str
    flash: str | None = None
    # "<record id>@<version>" of the records whose confirmation warning this session was
    # shown: the second step of a two-step confirm is taken only for one of them
    warned: set[str] = field(default_factory=set)


class Sessions:
    """The run's sessions, in memory: a session id (the cookie) -> its CSRF token."""

    def __init__(self, token: str, csrf_secret: bytes, random_bytes: RandomBytes) -> None:
        self._token = token
        self._secret = csrf_secret
        self._random = random_bytes
        self._sessions: dict[str, Session] = {}

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token.encode())

    def new(self) -> str:
        sid = base64.urlsafe_b64encode(self._random(32)).decode().rstrip("=")
        csrf = hmac.new(self._secret, sid.encode(), hashlib.sha256).hexdigest()
        self._sessions[sid] = Session(csrf)
        return sid

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        for known, session in self._sessions.items():
            if hmac.compare_digest(known.encode(), sid.encode()):
                return session
        return None


class Guard:
    """ASGI middleware: the security headers on every answer, and the Host check."""

    def __init__(self, app: ASGIApp, port: int | None) -> None:
        self.app = app
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode().lower() not in {h.lower() for h in SECURITY_HEADERS}
                ]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message["headers"] = headers
            await send(message)

        port = self.port if self.port is not None else (scope.get("server") or ("", 0))[1]
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if host not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            refused = _page(
                403,
                "Not this address",
                f"This inspector only answers at 127.0.0.1:{port} or localhost:{port}; "
                f"the request named host {host[:80]!r}, so nothing was read or changed.",
            )
            await refused(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


def same_origin(request: Request) -> bool:
    origin = f"http://{request.headers.get('host', '')}"
    given = request.headers.get("origin")
    if given is not None:
        return given == origin
    referer = request.headers.get("referer")
    if referer is None:
        return False
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}" == origin


def local_path(path: str | None, default: str) -> str:
    """A path on this site to go back to (never another origin)."""
    if path and path.startswith("/") and not path.startswith("//") and "\\" not in path:
        return path
    return default
