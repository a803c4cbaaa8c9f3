"""The HTTP face of the cloud: every route of docs/protocol.md, over ``CloudService``.

Invariants:
- A body is read here, never by the framework: a declared Content-Type must be JSON
  (415), its size is checked against Content-Length and against the bytes actually
  read (413), it must be a JSON object that ``cloud.validation.load_json`` accepts
  (400 ``malformed_request`` naming the path), its ``protocol_version`` is checked
  before anything else (400 ``unsupported_protocol_version`` naming the range), then
  the envelope is validated strictly (400 naming the field).
- The OpenAPI document at ``/openapi.json`` is ``cloud.openapi``'s contract.
- Every error leaves as an ``ErrorBody``; exceptions are mapped in one place.
- Every route but health and enroll needs ``Authorization: Bearer <credential>``, and
  the credential alone decides the space.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from cloud.config import CloudConfig
from cloud.errors import (
    CloudError,
    MalformedRequest,
    NotFound,
    RequestTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from cloud.openapi import install_openapi
from cloud.service import CloudService
from cloud.validation import BadJson, describe, is_json_media_type, load_json
from protocol.errors import MalformedCursor, UnsupportedProtocolVersion
from protocol.ids import is_id
from protocol.messages import (
    AccountKeyRequest,
    AckRequest,
    EnrollRequest,
    ErrorBody,
    ErrorCode,
    PullRequest,
    PushRequest,
    RecallRequest,
    peek_version,
)
from protocol.operations import MAX_OPS_PER_PUSH
from protocol.version import PROTOCOL_VERSION, SUPPORTED_VERSIONS

_M = TypeVar("_M", bound=BaseModel)
_R = TypeVar("_R")


def _json(model: BaseModel, status: int = 200, *, exclude_none: bool = False) -> Response:
    return Response(
        content=model.model_dump_json(exclude_none=exclude_none),
        status_code=status,
        media_type="application/json",
    )


def _error(status: int, code: ErrorCode, message: str) -> Response:
    return _json(ErrorBody(code=code, message=message), status)


async def _read_object(request: Request, max_bytes: int) -> dict[str, Any]:
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
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > max_bytes:
            raise RequestTooLarge(f"request body is over the limit of {max_bytes} bytes")
    try:
        raw = load_json(bytes(body))
    except BadJson as exc:
        raise MalformedRequest(str(exc)) from exc
    if not isinstance(raw, dict):
        raise MalformedRequest(f"body must be a JSON object, got {type(raw).__name__}")
    peek_version(raw)
    return raw


def _parse(model: type[_M], raw: dict[str, Any]) -> _M:
    """Strict JSON validation: ``"5"`` is not an integer, ``"true"`` not a boolean."""
    try:
        return model.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as exc:
        raise MalformedRequest(f"{model.__name__} is malformed: {describe(exc)}") from exc


def _credential(request: Request) -> str:
    header = request.headers.get("authorization")
    if not header:
        raise Unauthorized("missing Authorization header (expected 'Bearer <credential>')")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <credential>'")
    return credential.strip()


def create_app(config: CloudConfig) -> FastAPI:
    """The FastAPI app over a fresh ``CloudService`` (closed when the app shuts down)."""
    service = CloudService(config)
    max_bytes = config.max_request_bytes

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.close()

    app = FastAPI(title="memsync cloud", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service

    async def call(fn: Callable[..., _R], *args: Any) -> _R:
        return await run_in_threadpool(fn, *args)

    async def who(request: Request) -> tuple[str, str]:
        return await call(service.authenticate, _credential(request))

    @app.exception_handler(CloudError)
    async def _cloud_error(_request: Request, exc: CloudError) -> Response:
        if exc.code is None:
            raise exc
        return _error(exc.status, exc.code, str(exc))

    @app.exception_handler(UnsupportedProtocolVersion)
    async def _version(_request: Request, exc: UnsupportedProtocolVersion) -> Response:
        return _error(400, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, str(exc))

    @app.exception_handler(MalformedCursor)
    async def _cursor(_request: Request, exc: MalformedCursor) -> Response:
        return _error(400, ErrorCode.MALFORMED_CURSOR, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return _error(404, ErrorCode.NOT_FOUND, f"no route {request.url.path}")
        return _error(
            exc.status_code,
            ErrorCode.MALFORMED_REQUEST,
            f"{request.method} {request.url.path}: {exc.detail}",
        )

    @app.get("/v1/health")
    async def health() -> Response:
        body = {
            "protocol_version": PROTOCOL_VERSION,
            "status": "ok",
            "supported_versions": list(SUPPORTED_VERSIONS),
        }
        return Response(content=json.dumps(body), media_type="application/json")

    @app.post("/v1/enroll")
    async def enroll(request: Request) -> Response:
        req = _parse(EnrollRequest, await _read_object(request, max_bytes))
        return _json(await call(service.enroll, req))

    @app.post("/v1/push")
    async def push(request: Request) -> Response:
        space_id, device_id = await who(request)
        raw = await _read_object(request, max_bytes)
        ops = raw.get("ops")
        if isinstance(ops, list) and len(ops) > MAX_OPS_PER_PUSH:
            raise RequestTooLarge(
                f"push carries {len(ops)} ops; at most {MAX_OPS_PER_PUSH} per request"
            )
        req = _parse(PushRequest, raw)
        return _json(await call(service.push, space_id, device_id, req))

    @app.post("/v1/pull")
    async def pull(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = _parse(PullRequest, await _read_object(request, max_bytes))
        return _json(await call(service.pull, space_id, device_id, req))

    @app.post("/v1/recall")
    async def recall(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = _parse(RecallRequest, await _read_object(request, max_bytes))
        return _json(await call(service.recall, space_id, device_id, req))

    @app.post("/v1/ack")
    async def ack(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = _parse(AckRequest, await _read_object(request, max_bytes))
        return _json(await call(service.ack, space_id, device_id, req))

    @app.post("/v1/account-key")
    async def account_key(request: Request) -> Response:
        space_id, device_id = await who(request)
        req = _parse(AccountKeyRequest, await _read_object(request, max_bytes))
        return _json(await call(service.register_account_key, space_id, device_id, req))

    @app.get("/v1/forgets/pending")
    async def pending(request: Request) -> Response:
        space_id, _device_id = await who(request)
        return _json(await call(service.pending, space_id))

    @app.get("/v1/records/{record_id}")
    async def record(request: Request, record_id: str) -> Response:
        space_id, _device_id = await who(request)
        if not is_id("rec", record_id):
            raise NotFound(f"record {record_id[:80]!r} does not exist: it is not a record id")
        state = await call(service.record_status, space_id, record_id)
        return _json(state, exclude_none=True)

    install_openapi(app)
    return app
