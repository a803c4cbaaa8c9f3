"""Reading a POST's form: urlencoded or multipart, parsed with the standard library.

Invariant: a multipart body larger than ``MAX_UPLOAD_BYTES`` is refused (413) before it
is parsed; a file field becomes an ``Upload``. The app's guard reads a POST's form once
(``read_form``) and keeps it on the request; endpoints take it from there (``form``).
"""

from __future__ import annotations

import email.parser
import email.policy
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastapi import Request

from device.errors import InspectorRefused

MAX_UPLOAD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Upload:
    filename: str
    data: bytes


async def read_form(request: Request) -> dict[str, Any]:
    """The POST's fields (urlencoded or multipart, parsed here: no extra dependency);
    a file field becomes an ``Upload``."""
    body = await request.body()
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        if len(body) > MAX_UPLOAD_BYTES:
            raise InspectorRefused(request.url.path, "the upload is too large", status=413)
        raw = f"Content-Type: {kind}\r\n\r\n".encode() + body
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
        fields: dict[str, Any] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            data = part.get_payload(decode=True)
            payload = data if isinstance(data, bytes) else b""
            filename = part.get_filename()
            if filename is not None:
                fields[name] = Upload(filename, payload)
            else:
                fields[name] = payload.decode("utf-8", "replace")
        return fields
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


def form(request: Request) -> dict[str, Any]:
    """The fields the app's guard read of this POST (``request.state.form``)."""
    fields: dict[str, Any] = request.state.form
    return fields
