"""The HTTP face of the cloud: every route of docs/protocol.md, over ``CloudService``.

Invariants:
- A body is read here, never by the framework: a declared Content-Type must be JSON
  (415), its size is checked against Content-Length and against the bytes actually
  read (413), it must be a JSON object that ``cloud.validation.load_json`` accepts
  (400 ``malformed_request`` naming the path), its ``protocol_version`` is checked
  before anything else against ``CloudConfig.supported_versions`` (400
  ``unsupported_protocol_version`` naming the range), then the envelope is validated
  strictly for that version (400 naming the field; a field of a later version names
  the version it needs).
- Every answer is rendered in the request's protocol version (``protocol.versioned``),
  so a version-1 request gets exactly version 1's bytes. An answer to a request that
  carries no supported version (GET routes, refusals of the version itself) is in the
  lowest version of the cloud's range, which every device it accepts can read.
- The OpenAPI document at ``/openapi.json`` is ``cloud.openapi``'s contract.
- Every error leaves as an ``ErrorBody``; exceptions are mapped in one place.
- Every route but health and enroll needs ``Authorization: Bearer <credential>``, and
  the credential alone decides the space. A revoked device's credential is refused
  everywhere (401 ``device_revoked``) except ``/v1/wiped``, where it only confirms
  the device's wipe.
- ``/v1/export`` answers its refusals (403, 409, 503 and the usual ones) as plain
  errors before any byte of the package; then it streams the sealed package
  (``protocol.export.stream.MEDIA_TYPE``) from a worker thread, one frame at a time,
  and when the client goes away the frame iterator is closed at once (its store
  snapshot released and the export logged as abandoned).
- A device of an ended space is refused everywhere (410 ``account_ended``) except
  ``/v1/wiped``, where it confirms it wiped its copy.
- Every request passes the closing gate first (``cloud.closing``): while the service
  is closing every answer carries the ``Memsync-Closing`` header; once it closed, a
  route the gate does not keep open answers 503 ``service_closed`` before its body is
  read, and nothing changes. The check costs a clock read and a comparison; the store
  is read (in a worker thread) only when the cached state is stale.
- Outside the closing gate, ``cloud.telemetry`` gives every request its id, times and
  logs it, and answers ``GET /metrics`` (``cloud.metrics``: a registry of this app's
  own); a push's receipts are counted by outcome as the push answers.
- A live pull (``wait`` > 0) with nothing after its cursor waits in the event loop
  (``cloud.live``), holding no database connection and no worker thread, until the
  space changes, ``wait`` passes, the client goes away or a newer pull by the same
  device arrives; then it is answered like any pull (possibly an empty page).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cloud import closing
from cloud.config import CloudConfig
from cloud.errors import (
    BodyTooSlow,
    CloudError,
    MalformedRequest,
    NotFound,
    RequestTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from cloud.metrics import Metrics
from cloud.openapi import install_openapi
from cloud.service import CloudService, decode_cursor
from cloud.store.sql_ops import GaugeCounts
from cloud.telemetry import Telemetry
from cloud.validation import BadJson, TooManyValues, describe, is_json_media_type, load_json
from protocol.errors import FieldNotInVersion, MalformedCursor, UnsupportedProtocolVersion
from protocol.export.stream import MEDIA_TYPE as EXPORT_MEDIA_TYPE
from protocol.ids import is_id
from protocol.messages import (
    CLOSING_HEADER,
    DELETE_ACCOUNT_SINCE,
    SUBSET_SINCE,
    AccountKeyChangeRequest,
    AccountKeyRequest,
    AckRequest,
    DeleteAccountRequest,
    EnrollRequest,
    Envelope,
    ErrorBody,
    ErrorCode,
    ExportRequest,
    PinRequest,
    PullRequest,
    PushRequest,
    RecallRequest,
    SubsetPolicyRequest,
    WipedRequest,
    peek_version,
)
from protocol.operations import MAX_OPS_PER_PUSH
from protocol.version import VersionRange
from protocol.versioned import parse, render_json

_M = TypeVar("_M", bound=BaseModel)
_R = TypeVar("_R")


def _answer_version(request: Request, supported: VersionRange) -> int:
    """The request's protocol version once it was read and accepted, else the lowest."""
    version = getattr(request.state, "protocol_version", None)
    return version if isinstance(version, int) else supported[0]


def _json(
    model: BaseModel, version: int, status: int = 200, *, exclude_none: bool = False
) -> Response:
    return Response(
        content=render_json(model, version, exclude_none=exclude_none),
        status_code=status,
        media_type="application/json",
    )


# an error message is a sentence or two; one that names values cuts each of them
# (``protocol.errors.shown``), and this bounds whatever still grew, so no answer
# echoes a large input back
MAX_ERROR_MESSAGE = 1_000


def _error(
    status: int, code: ErrorCode, message: str, version: int, supported: VersionRange
) -> Response:
    if len(message) > MAX_ERROR_MESSAGE:
        message = f"{message[:MAX_ERROR_MESSAGE]}… (message of {len(message)} characters cut)"
    body = ErrorBody(code=code, message=message, supported_versions=supported)
    return _json(body, version, status)


async def _read_bytes(request: Request, max_bytes: int, within: float) -> bytes:
    media_type = request.headers.get("content-type", "application/json")
    if not is_json_media_type(media_type):
        raise UnsupportedMediaType(f"Content-Type {media_type[:80]!r} is not application/json")
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError as exc:
            raise MalformedRequest(f"Content-Length {declared[:40]!r} is not a number") from exc
        if size > max_bytes:
            raise RequestTooLarge(
                f"request body of {size} bytes is over the limit of {max_bytes} bytes"
            )
    body = bytearray()
    try:
        async with asyncio.timeout(within):
            async for chunk in request.stream():
                body.extend(chunk)
                if len(body) > max_bytes:
                    raise RequestTooLarge(f"request body is over the limit of {max_bytes} bytes")
    except TimeoutError:
        raise BodyTooSlow(
            f"the request body did not arrive within {within:g} s ({len(body)} bytes came); "
            "nothing was changed"
        ) from None
    return bytes(body)


def _decode(
    body: bytes,
    state: Any,
    supported: VersionRange,
    model: type[_M],
    max_ops: int | None,
) -> _M:
    """The body as ``model``, in a worker thread (never on the event loop): parsed,
    its version and (for a push) its op count checked on the parsed value before the
    walk over every value (``load_json``'s ``first``), then validated strictly."""

    def first(raw: Any) -> None:
        if not isinstance(raw, dict):
            raise MalformedRequest(f"body must be a JSON object, got {type(raw).__name__}")
        state.protocol_version = peek_version(raw, supported)
        ops = raw.get("ops")
        if max_ops is not None and isinstance(ops, list) and len(ops) > max_ops:
            raise RequestTooLarge(f"push carries {len(ops)} ops; at most {max_ops} per request")

    try:
        raw = load_json(body, first)
    except TooManyValues as exc:
        raise RequestTooLarge(str(exc)) from exc
    except BadJson as exc:
        raise MalformedRequest(str(exc)) from exc
    return _parse(model, raw)


def _parse(model: type[_M], raw: dict[str, Any]) -> _M:
    """Strict JSON validation for the request's version: ``"5"`` is not an integer,
    ``"true"`` not a boolean, and a field of a later version is refused by name."""
    version = raw["protocol_version"]  # peeked and accepted by _decode
    try:
        return parse(model, raw, version, strict=True)
    except FieldNotInVersion as exc:
        raise MalformedRequest(f"{model.__name__} is malformed: {exc}") from exc
    except ValidationError as exc:
        raise MalformedRequest(f"{model.__name__} is malformed: {describe(exc)}") from exc


def _since(req: Envelope, version: int) -> None:
    """Refuse a message new in ``version`` sent in an older one (nothing is changed)."""
    if req.protocol_version < version:
        raise MalformedRequest(
            f"{type(req).__name__} is new in protocol version {version}; this request speaks "
            f"version {req.protocol_version} (nothing was changed)"
        )


def _credential(request: Request) -> str:
    header = request.headers.get("authorization")
    if not header:
        raise Unauthorized("missing Authorization header (expected 'Bearer <credential>')")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <credential>'")
    return credential.strip()


async def _disconnected(request: Request) -> None:
    """Return when the client has gone away (the body is already read)."""
    while True:
        message: Message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _in_worker(frames: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``frames`` iterated in the threadpool; closed (in the threadpool, shielded from
    the cancellation that a client going away brings) however the response ends."""
    done = object()
    try:
        while True:
            frame = await run_in_threadpool(next, frames, done)
            if frame is done:
                return
            assert isinstance(frame, bytes)
            yield frame
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(close)


class ClosingGate:
    """ASGI middleware: the service's closing gate (see the module invariants)."""

    def __init__(self, app: ASGIApp, service: CloudService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        service = self.service
        watch = service.closing
        now = service.config.clock()
        if watch.stale(now) or watch.owes_enforcement(now):
            await run_in_threadpool(service.closing_tick)
        state = watch.cached
        mode = closing.mode_at(state, now)
        if state is not None and not closing.gate(mode, scope["path"]):
            supported = service.config.supported_versions
            message = closing.refusal(state, scope["path"])
            refused = _error(503, ErrorCode.SERVICE_CLOSED, message, supported[0], supported)
            refused.headers[CLOSING_HEADER] = closing.header(state) or ""
            await refused(scope, receive, send)
            return
        notice = closing.header(state)
        if notice is None:
            await self.app(scope, receive, send)
            return

        async def send_with_notice(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append(CLOSING_HEADER, notice)
            await send(message)

        await self.app(scope, receive, send_with_notice)


def create_app(config: CloudConfig) -> FastAPI:
    """The FastAPI app over a fresh ``CloudService`` (closed when the app shuts down)."""
    service = CloudService(config)
    max_bytes = config.max_request_bytes
    supported = config.supported_versions

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.close()

    app = FastAPI(title="memsync cloud", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    app.add_middleware(ClosingGate, service=service)

    def gauge_counts() -> GaugeCounts:
        with service.store.session() as s:
            return s.gauge_counts()

    metrics = Metrics(gauge_counts, lambda: service.live.waiting)
    app.state.metrics = metrics
    app.add_middleware(Telemetry, config=config, metrics=metrics, routes=app.router.routes)

    async def call(fn: Callable[..., _R], *args: Any) -> _R:
        return await run_in_threadpool(fn, *args)

    async def who(request: Request) -> tuple[str, str]:
        return await call(service.authenticate, _credential(request))

    def error(request: Request, status: int, code: ErrorCode, message: str) -> Response:
        return _error(status, code, message, _answer_version(request, supported), supported)

    def answer(request: Request, model: BaseModel, *, exclude_none: bool = False) -> Response:
        return _json(model, _answer_version(request, supported), exclude_none=exclude_none)

    async def body(request: Request, model: type[_M], *, max_ops: int | None = None) -> _M:
        """The request's body as ``model``: read here, decoded in the threadpool."""
        raw = await _read_bytes(request, max_bytes, config.body_timeout)
        return await run_in_threadpool(_decode, raw, request.state, supported, model, max_ops)

    @app.exception_handler(CloudError)
    async def _cloud_error(request: Request, exc: CloudError) -> Response:
        if exc.code is None:
            raise exc
        return error(request, exc.status, exc.code, str(exc))

    @app.exception_handler(UnsupportedProtocolVersion)
    async def _version(request: Request, exc: UnsupportedProtocolVersion) -> Response:
        return error(request, 400, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, str(exc))

    @app.exception_handler(MalformedCursor)
    async def _cursor(request: Request, exc: MalformedCursor) -> Response:
        return error(request, 400, ErrorCode.MALFORMED_CURSOR, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return error(request, 404, ErrorCode.NOT_FOUND, f"no route {request.url.path}")
        return error(
            request,
            exc.status_code,
            ErrorCode.MALFORMED_REQUEST,
            f"{request.method} {request.url.path}: {exc.detail}",
        )

    @app.get("/v1/health")
    async def health() -> Response:
        body = {
            "protocol_version": supported[0],
            "status": "ok",
            "supported_versions": list(supported),
        }
        return Response(content=json.dumps(body), media_type="application/json")

    @app.post("/v1/enroll")
    async def enroll(request: Request) -> Response:
        req = await body(request, EnrollRequest)
        return answer(request, await call(service.enroll, req))

    @app.post("/v1/push")
    async def push(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, PushRequest, max_ops=MAX_OPS_PER_PUSH)
        pushed = await call(service.push, space_id, device_id, req)
        metrics.count_receipts(pushed.receipts)
        return answer(request, pushed)

    @app.post("/v1/pull")
    async def pull(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, PullRequest)
        service.live.supersede(space_id, device_id)  # a device waits in one pull at a time
        if req.wait > 0 and not await call(service.subset_news, space_id, device_id, req):
            after = decode_cursor(req.cursor)

            async def position() -> int:
                return await call(service.last_seq, space_id)

            await service.live.wait(
                space_id, device_id, after, req.wait, position, _disconnected(request)
            )
        return answer(request, await call(service.pull, space_id, device_id, req))

    @app.post("/v1/recall")
    async def recall(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, RecallRequest)
        return answer(request, await call(service.recall, space_id, device_id, req))

    @app.get("/v1/subset")
    async def subset(request: Request) -> Response:
        space_id, device_id = await who(request)
        return answer(request, await call(service.subset, space_id, device_id))

    @app.post("/v1/subset/policy")
    async def subset_policy(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, SubsetPolicyRequest)
        _since(req, SUBSET_SINCE)
        return answer(request, await call(service.set_subset_policy, space_id, device_id, req))

    @app.post("/v1/subset/pins")
    async def subset_pin(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, PinRequest)
        _since(req, SUBSET_SINCE)
        return answer(request, await call(service.pin, space_id, device_id, req))

    @app.post("/v1/ack")
    async def ack(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, AckRequest)
        return answer(request, await call(service.ack, space_id, device_id, req))

    @app.post("/v1/account-key")
    async def account_key(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, AccountKeyRequest)
        return answer(request, await call(service.register_account_key, space_id, device_id, req))

    @app.post("/v1/account-key/change")
    async def change_account_key(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, AccountKeyChangeRequest)
        return answer(request, await call(service.change_account_key, space_id, device_id, req))

    @app.post("/v1/export")
    async def export(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, ExportRequest)
        frames = await call(service.export, space_id, device_id, req)
        return StreamingResponse(_in_worker(frames), media_type=EXPORT_MEDIA_TYPE)

    @app.post("/v1/wiped")
    async def wiped(request: Request) -> Response:
        # the one route a revoked credential, or one of an ended space, may use: to
        # confirm the device wiped itself
        credential = _credential(request)
        await body(request, WipedRequest)
        return answer(request, await call(service.confirm_wipe, credential))

    @app.post("/v1/account/delete")
    async def delete_account(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = await body(request, DeleteAccountRequest)
        _since(req, DELETE_ACCOUNT_SINCE)
        return answer(request, await call(service.delete_account, space_id, device_id, req))

    @app.get("/v1/service")
    async def service_status(request: Request) -> Response:
        return answer(request, await call(service.service_status))

    @app.get("/v1/forgets/pending")
    async def pending(request: Request) -> Response:
        space_id, _device_id = await who(request)
        return answer(request, await call(service.pending, space_id))

    @app.get("/v1/devices")
    async def devices(request: Request) -> Response:
        space_id, _device_id = await who(request)
        return answer(request, await call(service.devices, space_id))

    @app.get("/v1/records/{record_id}")
    async def record(request: Request, record_id: str) -> Response:
        space_id, _device_id = await who(request)
        if not is_id("rec", record_id):
            raise NotFound(f"record {record_id[:80]!r} does not exist: it is not a record id")
        state = await call(service.record_status, space_id, record_id)
        return answer(request, state, exclude_none=True)

    install_openapi(app)
    return app
