"""The device's one HTTP seam: every request to the cloud goes through ``CloudClient``.

Invariants:
- One ``httpx.Client(base_url=..., transport=...)``; the transport is injected, so the
  same code runs over real HTTP, an in-process ASGI app, or a fault-injecting transport.
- Every request body is a protocol envelope carrying ``protocol_version``; every
  response is version-checked (``peek_version``) before it is parsed.
- httpx errors and non-2xx answers are mapped here, once, to ``device.errors``:
  connection errors and timeouts -> ``Offline``; an ``ErrorBody`` -> ``ServerRefused``;
  anything else -> ``ServerError``.
"""

from __future__ import annotations

import json
from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from device.errors import NotEnrolled, Offline, ServerError, ServerRefused
from protocol.errors import UnsupportedProtocolVersion
from protocol.messages import ErrorBody, peek_version

DEFAULT_TIMEOUT = 10.0

ResponseT = TypeVar("ResponseT", bound=BaseModel)


class CloudClient:
    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url = base_url
        self._http = httpx.Client(base_url=base_url, transport=transport, timeout=timeout)
        self.credential: str | None = None

    def close(self) -> None:
        self._http.close()

    def post(
        self,
        path: str,
        body: BaseModel,
        response_model: type[ResponseT],
        *,
        auth: bool = True,
        timeout: float | None = None,
    ) -> ResponseT:
        """``timeout`` (seconds) replaces the client's for this request (a live pull must
        wait longer than the cloud may hold it)."""
        headers = {"content-type": "application/json"}
        if auth:
            if self.credential is None:
                raise NotEnrolled(
                    f"POST {path} needs a device credential; enroll this device first"
                )
            headers["authorization"] = f"Bearer {self.credential}"
        try:
            response = self._http.post(
                path,
                content=body.model_dump_json(),
                headers=headers,
                timeout=self._http.timeout if timeout is None else timeout,
            )
        except httpx.TransportError as exc:
            raise Offline(
                f"cannot reach the cloud at {self.base_url} (POST {path}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return self._parse(path, response, response_model)

    def _parse(
        self, path: str, response: httpx.Response, response_model: type[ResponseT]
    ) -> ResponseT:
        try:
            raw = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServerError(
                f"POST {path}: HTTP {response.status_code} with a body that is not JSON: "
                f"{response.text[:200]!r}"
            ) from None
        if not response.is_success:
            try:
                error = ErrorBody.model_validate(raw)
            except ValidationError:
                raise ServerError(
                    f"POST {path}: HTTP {response.status_code} without a protocol error body: "
                    f"{str(raw)[:200]}"
                ) from None
            raise ServerRefused(error.code.value, error.message, response.status_code)
        if not isinstance(raw, dict):
            raise ServerError(f"POST {path}: expected a JSON object, got {type(raw).__name__}")
        try:
            peek_version(raw)
            return response_model.model_validate(raw)
        except UnsupportedProtocolVersion as exc:
            raise ServerError(f"POST {path}: the cloud answered in {exc}") from exc
        except ValidationError as exc:
            raise ServerError(
                f"POST {path}: the answer is not a valid {response_model.__name__}: {exc}"
            ) from exc
