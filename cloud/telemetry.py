"""The outermost ASGI layer: request ids, the access log line, latency, ``/metrics``.

Invariants:
- Every HTTP request has one id: the client's ``X-Request-ID`` when it is 1 to 128
  characters of ``[A-Za-z0-9._:-]``, else a new one (``CloudConfig.request_id``). It is
  echoed in the answer's ``X-Request-ID`` header and set in ``cloud.logs.REQUEST_ID``
  for every line logged while the request runs (worker threads included).
- Each request, answered or failed, is timed (``CloudConfig.timer``) into the latency
  histogram under its route template and logged once on ``memsync.http``: method,
  route template, status, latency. Never the raw path, the query, a header or a body.
- ``GET /metrics`` is answered here, before the closing gate (metrics stay readable
  while the service closes), only when ``CloudConfig.metrics`` is on (else it is the
  app's 404); with a ``metrics_token`` it needs ``Authorization: Bearer <token>``
  (401 otherwise, compared in constant time). It is not in the OpenAPI document: it is
  the operator's, not the devices' contract.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cloud.config import CloudConfig
from cloud.logs import ACCESS_LOGGER, REQUEST_ID
from cloud.metrics import CONTENT_TYPE, Metrics
from protocol.messages import ErrorBody, ErrorCode
from protocol.version import LOWEST_VERSION
from protocol.versioned import render_json

REQUEST_ID_HEADER = "X-Request-ID"
METRICS_PATH = "/metrics"
UNMATCHED = "(unmatched)"  # the route label of a path no route serves
_GOOD_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
access_log = logging.getLogger(ACCESS_LOGGER)


def request_id_of(headers: Headers, make: Callable[[], str]) -> str:
    given = headers.get(REQUEST_ID_HEADER)
    return given if given is not None and _GOOD_ID.match(given) else make()


def route_of(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route serving ``scope`` (FastAPI sets it when it routes;
    a request refused before routing is matched here)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    if scope.get("path") == METRICS_PATH:
        return METRICS_PATH
    for candidate in routes:
        match, _child = candidate.matches(scope)
        if match is Match.FULL:
            template = getattr(candidate, "path", None)
            return template if isinstance(template, str) else UNMATCHED
    return UNMATCHED


class Telemetry:
    """ASGI middleware (see the module invariants)."""

    def __init__(
        self, app: ASGIApp, *, config: CloudConfig, metrics: Metrics, routes: Sequence[BaseRoute]
    ) -> None:
        self.app = app
        self.config = config
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        config = self.config
        request_id = request_id_of(Headers(scope=scope), config.request_id)
        token = REQUEST_ID.set(request_id)
        started = config.timer()
        status = 500  # what a request that fails before answering counts as

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            if config.metrics and scope["path"] == METRICS_PATH and scope["method"] == "GET":
                await self._metrics(scope)(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            seconds = config.timer() - started
            route = route_of(scope, self.routes)
            method = str(scope["method"])
            self.metrics.observe(method, route, status, seconds)
            fields: dict[str, Any] = {
                "method": method,
                "route": route,
                "status": status,
                "latency_ms": round(seconds * 1000, 3),
            }
            access_log.info("%s %s %s %.1f ms", method, route, status, seconds * 1000, extra=fields)
            REQUEST_ID.reset(token)

    def _metrics(self, scope: Scope) -> Callable[[Scope, Receive, Send], Any]:
        expected = self.config.metrics_token
        if expected is not None:
            header = Headers(scope=scope).get("authorization", "")
            scheme, _, given = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), expected.encode()
            ):
                body = ErrorBody(
                    code=ErrorCode.UNAUTHORIZED,
                    message="GET /metrics needs 'Authorization: Bearer <metrics token>' "
                    "(the MEMSYNC_METRICS_TOKEN setting)",
                )
                return Response(
                    render_json(body, LOWEST_VERSION), 401, media_type="application/json"
                )

        async def answer(scope: Scope, receive: Receive, send: Send) -> None:
            body = await run_in_threadpool(self.metrics.render)
            await Response(body, 200, media_type=CONTENT_TYPE)(scope, receive, send)

        return answer
