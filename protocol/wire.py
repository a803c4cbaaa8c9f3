"""The base of every model that crosses the wire.

Invariant: wire models are frozen, keyword-only, and refuse unknown fields, so a
typo or a field from another protocol version is an error, never silently dropped.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainSerializer


class WireModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)


def _b64_decode(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise ValueError("expected a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not valid base64: {exc}") from exc


def _b64_encode(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


B64Bytes = Annotated[
    bytes,
    BeforeValidator(_b64_decode),
    PlainSerializer(_b64_encode, return_type=str, when_used="json"),
]


def _require_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamps on the wire must carry a time zone")
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_require_utc)]
