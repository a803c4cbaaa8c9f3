"""The cloud's OpenAPI document: the HTTP contract, served at ``/openapi.json``.

Invariants:
- Every ``/v1`` route has exactly one ``RouteContract`` here; the document is
  FastAPI's own (paths, methods, path parameters) with each contract laid over it, so a
  route without a contract still appears, and a test fails until it is described.
- Request bodies are the pydantic envelopes' validation schemas, response bodies their
  serialization schemas, all under ``components/schemas``. ``protocol_version`` is
  required in every request and bounded by ``SUPPORTED_VERSIONS``, as ``cloud.app``
  checks it before anything else; base64 fields carry the pattern the server decodes.
- Every status a route can answer is listed; every error answer is an ``ErrorBody``.
- Routes that need a device credential carry the ``bearer`` security requirement, and
  410 (``account_ended``: the space ended); every route the closing gate refuses once
  the service closed (``cloud.closing.gate``) lists 503 (``service_closed``).
- A route that streams binary (``/v1/export``) documents its 200 as that media type
  with a binary string schema: the sealed frames of ``protocol.export.stream``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from cloud import closing
from protocol.export.stream import MEDIA_TYPE as EXPORT_MEDIA_TYPE
from protocol.messages import (
    AccountKeyChangeRequest,
    AccountKeyRequest,
    AccountKeyResponse,
    AckRequest,
    AckResponse,
    DeleteAccountRequest,
    DeleteAccountResponse,
    DevicesResponse,
    EnrollRequest,
    EnrollResponse,
    ErrorBody,
    ExportRequest,
    PendingResponse,
    PinRequest,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecallRequest,
    RecallResponse,
    RecordState,
    ServiceMode,
    ServiceStatus,
    SubsetPolicyRequest,
    SubsetResponse,
    WipedRequest,
    WipedResponse,
)
from protocol.version import SUPPORTED_VERSIONS

REF = "#/components/schemas/{model}"
BEARER = "bearer"
# what base64.b64decode(validate=True) accepts: whole quanta, padding only at the end
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
# exactly 32 bytes (an X25519 or Ed25519 public key): 43 characters and one "="
KEY_32_PATTERN = r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
KEY_32_FIELDS = {
    ("EnrollRequest", "public_key"),
    ("AccountKeyRequest", "account_key"),
    ("AccountKeyChangeRequest", "account_key"),
}
RECORD_ID_PATTERN = r"^rec_[a-z0-9]{8,64}$"

ERROR_MEANINGS: dict[int, str] = {
    400: "malformed_request (names the field and the reason), "
    "unsupported_protocol_version (names the accepted range) or malformed_cursor",
    401: "unauthorized (no, malformed or unknown credential) or device_revoked",
    403: "enrollment_refused: the code is unknown, used or expired; or strong_auth_required: "
    "no account key is registered, or the proof does not verify",
    404: "not_found: no such record in the caller's space",
    409: "pull_required (unacknowledged key destruction), account_key_mismatch, "
    "export_id_used (an export id starts one export only) or pin_refused (the record is "
    "forgotten, or the device has as many pins as it may)",
    410: "resync_required: the cursor is below the space's compacted feed floor; or "
    "account_ended: the space ended, so the device must wipe its copy",
    413: "request_too_large: the body or its op count is over the limit",
    415: "malformed_request: the body is not declared as application/json",
    503: "service_closed: the service closed; only export and reads stay open; or "
    "export_unavailable: a store the export needs cannot be read (named) after waiting",
}
BODY_ERRORS = (400, 413, 415)


@dataclass(frozen=True, kw_only=True)
class RouteContract:
    """What one route takes and answers."""

    summary: str
    response: type[BaseModel] | None  # None: described inline (health, a stream)
    request: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    authenticated: bool = True
    record_id_param: bool = False
    stream: tuple[str, str] | None = None  # (media type, description): a binary 200


HEALTH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["protocol_version", "status", "supported_versions"],
    "properties": {
        "protocol_version": {"type": "integer"},
        "status": {"const": "ok"},
        "supported_versions": {
            "type": "array",
            "items": {"type": "integer"},
            "minItems": 2,
            "maxItems": 2,
        },
    },
}

CONTRACTS: dict[tuple[str, str], RouteContract] = {
    ("GET", "/v1/health"): RouteContract(
        summary="Liveness and the accepted protocol versions", response=None, authenticated=False
    ),
    ("POST", "/v1/enroll"): RouteContract(
        summary="Enroll a device with a single-use code",
        request=EnrollRequest,
        response=EnrollResponse,
        errors=(*BODY_ERRORS, 403),
        authenticated=False,
    ),
    ("POST", "/v1/push"): RouteContract(
        summary="Apply a batch of operations; one receipt per operation",
        request=PushRequest,
        response=PushResponse,
        errors=(*BODY_ERRORS, 401, 409),
    ),
    ("POST", "/v1/pull"): RouteContract(
        summary="Changes since a cursor, in server order",
        request=PullRequest,
        response=PullResponse,
        errors=(*BODY_ERRORS, 401, 410),
    ),
    ("POST", "/v1/recall"): RouteContract(
        summary="Retrieval over the whole space, sealed to the device",
        request=RecallRequest,
        response=RecallResponse,
        errors=(*BODY_ERRORS, 401),
    ),
    ("POST", "/v1/ack"): RouteContract(
        summary="Acknowledge key-destruction events",
        request=AckRequest,
        response=AckResponse,
        errors=(*BODY_ERRORS, 401),
    ),
    ("POST", "/v1/account-key"): RouteContract(
        summary="Register the account's Ed25519 verify key",
        request=AccountKeyRequest,
        response=AccountKeyResponse,
        errors=(*BODY_ERRORS, 401, 409),
    ),
    ("POST", "/v1/account-key/change"): RouteContract(
        summary="Change the account's verify key (a new account passphrase), proved by the "
        "current key and the new one",
        request=AccountKeyChangeRequest,
        response=AccountKeyResponse,
        errors=(*BODY_ERRORS, 401, 403),
    ),
    ("POST", "/v1/export"): RouteContract(
        summary="Export the whole space as one package, sealed to the asking device "
        "(strong authentication: the account key's proof)",
        request=ExportRequest,
        response=None,
        errors=(*BODY_ERRORS, 401, 403, 409, 503),
        stream=(
            EXPORT_MEDIA_TYPE,
            "The package as a sealed stream (protocol.export.stream): 4-byte big-endian "
            "length-prefixed frames; the first holds MSX1, a 16-byte nonce prefix and the "
            "stream key sealed to the device's public key; every later frame is one sealed "
            "chunk (data, then final; or error with the reason). See docs/export.md.",
        ),
    ),
    ("POST", "/v1/wiped"): RouteContract(
        summary="A revoked device confirms it wiped its copy (revoked credentials only)",
        request=WipedRequest,
        response=WipedResponse,
        errors=(*BODY_ERRORS, 401, 404),
    ),
    ("POST", "/v1/account/delete"): RouteContract(
        summary="Delete the account: every key of its memory is destroyed (strong auth)",
        request=DeleteAccountRequest,
        response=DeleteAccountResponse,
        errors=(*BODY_ERRORS, 401, 403),
    ),
    ("GET", "/v1/service"): RouteContract(
        summary="The service's region and whether it is closing",
        response=ServiceStatus,
        authenticated=False,
    ),
    ("GET", "/v1/subset"): RouteContract(
        summary="The calling device's subset: policy, pins, what the cloud chose for it",
        response=SubsetResponse,
        errors=(401,),
    ),
    ("POST", "/v1/subset/policy"): RouteContract(
        summary="Replace the calling device's subset rules and budget (protocol 3 on)",
        request=SubsetPolicyRequest,
        response=SubsetResponse,
        errors=(*BODY_ERRORS, 401),
    ),
    ("POST", "/v1/subset/pins"): RouteContract(
        summary="Pin a record to the calling device, or unpin it (protocol 3 on)",
        request=PinRequest,
        response=SubsetResponse,
        errors=(*BODY_ERRORS, 401, 404, 409),
    ),
    ("GET", "/v1/forgets/pending"): RouteContract(
        summary="Forgets some device has not confirmed yet", response=PendingResponse, errors=(401,)
    ),
    ("GET", "/v1/devices"): RouteContract(
        summary="The devices of the caller's space: enrolled, last seen, revoked, wiped",
        response=DevicesResponse,
        errors=(401,),
    ),
    ("GET", "/v1/records/{record_id}"): RouteContract(
        summary="A record's state, or its skeleton when forgotten (never content)",
        response=RecordState,
        errors=(401, 404),
        record_id_param=True,
    ),
}


def _component_schemas() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorBody, "serialization")]
    for contract in CONTRACTS.values():
        if contract.request is not None:
            models.append((contract.request, "validation"))
        if contract.response is not None:
            models.append((contract.response, "serialization"))
    _, top = models_json_schema(models, ref_template=REF)
    schemas: dict[str, Any] = top.get("$defs", {})
    for name in {c.request.__name__ for c in CONTRACTS.values() if c.request is not None}:
        _tighten_request(schemas[name])
    for schema in schemas.values():
        for node in _walk(schema):
            if node.get("format") == "binary" and node.get("type") == "string":
                del node["format"]
                node["contentEncoding"] = "base64"
                node["pattern"] = BASE64_PATTERN
            items = node.pop("prefixItems", None)
            if items is not None:  # a tuple; schemathesis reads prefixItems as old `items`
                node["items"] = {"anyOf": items} if len(items) > 1 else items[0]
    for model, field in KEY_32_FIELDS:
        schemas[model]["properties"][field]["pattern"] = KEY_32_PATTERN
    return schemas


def _tighten_request(schema: dict[str, Any]) -> None:
    """``protocol_version`` is read before the envelope, so it is required and bounded."""
    low, high = SUPPORTED_VERSIONS
    version = schema["properties"]["protocol_version"]
    version.pop("default", None)
    version.update(minimum=low, maximum=high)
    schema["required"] = ["protocol_version", *schema.get("required", [])]


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": REF.format(model=model.__name__)}


def _operation(method: str, path: str, contract: RouteContract) -> dict[str, Any]:
    if contract.stream is not None:
        media_type, description = contract.stream
        binary = {"type": "string", "format": "binary"}
        ok = {"description": description, "content": {media_type: {"schema": binary}}}
    else:
        schema = HEALTH_SCHEMA if contract.response is None else _ref(contract.response)
        ok = _json(schema, "OK")
    responses: dict[str, Any] = {"200": ok}
    for status in sorted({*contract.errors, *_closing_errors(path, contract)}):
        responses[str(status)] = _json(_ref(ErrorBody), ERROR_MEANINGS[status])
    operation: dict[str, Any] = {
        "summary": contract.summary,
        "operationId": f"{method.lower()}_{path.strip('/').replace('/', '_')}".replace("{", "")
        .replace("}", "")
        .replace("-", "_"),
        "responses": responses,
    }
    if contract.request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(contract.request)}},
        }
    if contract.record_id_param:
        operation["parameters"] = [
            {
                "name": "record_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "pattern": RECORD_ID_PATTERN},
            }
        ]
    operation["security"] = [{BEARER: []}] if contract.authenticated else []
    return operation


def _closing_errors(path: str, contract: RouteContract) -> tuple[int, ...]:
    """410 on every authenticated route (the space ended); 503 where the closing gate
    refuses once the service closed."""
    shown = path.replace("{record_id}", "rec_x")
    refused = any(not closing.gate(mode, shown) for mode in ServiceMode)
    return (*((410,) if contract.authenticated else ()), *((503,) if refused else ()))


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document of ``app`` with every known route's contract laid over it."""
    document = get_openapi(title=app.title, version=app.version, routes=app.routes)
    for (method, path), contract in CONTRACTS.items():
        item = document.get("paths", {}).get(path, {})
        if method.lower() in item:
            item[method.lower()] = _operation(method, path, contract)
    components = document.setdefault("components", {})
    used = json.dumps(document["paths"])
    framework = {  # FastAPI's own (e.g. its 422 body) only while an undescribed route uses it
        name: schema
        for name, schema in components.get("schemas", {}).items()
        if REF.format(model=name) in used
    }
    components["schemas"] = {**framework, **_component_schemas()}
    components["securitySchemes"] = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "the device credential from /v1/enroll; it alone decides the space",
        }
    }
    return document


def install_openapi(app: FastAPI) -> None:
    """Serve ``build_openapi(app)`` (built once, on first request) at ``app.openapi_url``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    setattr(app, "openapi", openapi)  # noqa: B010 - FastAPI's documented override point
