"""The device's one HTTP seam: every request to the cloud goes through ``CloudClient``.

Invariants:
- One ``httpx.Client(base_url=..., transport=...)``; the transport is injected, so the
  same code runs over real HTTP, an in-process ASGI app, or a fault-injecting transport.
- Every request body is a protocol envelope rendered for the version this client
  speaks (``protocol.versioned``); every response is version-checked before it is
  parsed, and must be in the version the request went out in.
- Version negotiation: a client speaks the highest version of its range until a cloud
  refuses it (400 ``unsupported_protocol_version``); then it reads the cloud's range
  from the ``ErrorBody``, retries that one request once in the highest version both
  speak, and keeps speaking it for the rest of its life. A refused version means the
  cloud did nothing, so the retry cannot apply anything twice. With no common version
  it raises ``NoCommonProtocolVersion`` naming both ranges.
- Every answer's ``Memsync-Closing`` header (the service is closing) is kept in
  ``closing``, so the device can tell its user.
- httpx errors and non-2xx answers are mapped here, once, to ``device.errors``:
  a read timeout (the request reached the cloud, its answer did not come in time) ->
  ``CloudSlow``, a subclass of ``Offline``; other connection errors and timeouts ->
  ``Offline``; an ``ErrorBody`` -> ``ServerRefused``
  (or its specific subclass for a code the device acts on, ``device.errors.refusal``);
  anything else -> ``ServerError``.
- ``get`` is a GET with the credential (no body); the cloud answers a GET in the
  lowest version of its range, so the answer may carry any version of this client's.
- ``post_stream`` is the same request (same headers, negotiation and error mapping)
  for an answer read as a byte stream (an export); a success must carry the media
  type asked for, and a connection lost mid-stream is ``Offline``, never an end.
- TLS is verified against httpx's default roots, with one context per process
  (``tls_context``): building one parses the CA bundle, about 30 ms.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from device.errors import (
    CloudSlow,
    NeedsNewerProtocol,
    NoCommonProtocolVersion,
    NotEnrolled,
    Offline,
    ServerError,
    UnknownChangeKind,
    refusal,
)
from protocol.errors import FieldNotInVersion, UnsupportedProtocolVersion
from protocol.messages import CLOSING_HEADER, ErrorBody, ErrorCode, PullRequest, peek_version
from protocol.version import SUPPORTED_VERSIONS, VersionRange, check_range, common_version
from protocol.versioned import introduced_in, parse, render_json

DEFAULT_TIMEOUT = 10.0
LIVE_PULL_SINCE = introduced_in(PullRequest, "wait")

ResponseT = TypeVar("ResponseT", bound=BaseModel)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verifying TLS context every client and transport of this process shares
    (httpx's default: certifi's roots, hostnames checked)."""
    return httpx.create_ssl_context()


class CloudClient:
    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        protocol_versions: VersionRange = SUPPORTED_VERSIONS,
    ) -> None:
        self.base_url = base_url
        self.protocol_versions = check_range(protocol_versions)
        self._version = self.protocol_versions[1]
        self._http = httpx.Client(
            base_url=base_url,
            transport=transport,
            verify=tls_context(),
            timeout=timeout,
        )
        self.credential: str | None = None
        # the ``Memsync-Closing`` header of the last answer (None: the service is not closing)
        self.closing: str | None = None

    @property
    def protocol_version(self) -> int:
        """The version requests go out in: the highest of this client's range until a
        cloud refused it, then the one negotiated with that cloud."""
        return self._version

    @property
    def live_pull(self) -> bool:
        """Whether the version spoken carries ``PullRequest.wait`` (a live pull)."""
        return self._version >= LIVE_PULL_SINCE

    def close(self) -> None:
        self._http.close()

    def post(
        self,
        path: str,
        body: BaseModel | Callable[[int], BaseModel],
        response_model: type[ResponseT],
        *,
        auth: bool = True,
        timeout: float | None = None,
    ) -> ResponseT:
        """``timeout`` (seconds) replaces the client's for this request (a live pull must
        wait longer than the cloud may hold it). ``body`` may be a function of the
        protocol version, for bodies whose raw parts depend on it (a push's ops): it is
        built again for the version negotiated if the cloud refuses the first."""
        build = body if callable(body) else (lambda _version: body)
        headers = self._headers(path, auth)
        response = self._send(path, build(self._version), headers, timeout)
        refusal = _version_refusal(response)
        if refusal is not None and self._negotiate(refusal):
            response = self._send(path, build(self._version), headers, timeout)
        return self._parse(path, response, response_model)

    def get(self, path: str, response_model: type[ResponseT]) -> ResponseT:
        """GET with the device credential; the answer parsed in the version it carries
        (any of this client's range: a GET carries no version, so the cloud answers in
        the lowest of its own)."""
        headers = self._headers(path, auth=True)
        del headers["content-type"]
        try:
            response = self._http.get(path, headers=headers)
        except httpx.TransportError as exc:
            raise self._offline(path, exc) from exc
        self.closing = response.headers.get(CLOSING_HEADER)
        return self._parse(path, response, response_model, versions=self.protocol_versions)

    @contextmanager
    def post_stream(
        self,
        path: str,
        body: BaseModel | Callable[[int], BaseModel],
        *,
        media_type: str,
        timeout: float | None = None,
    ) -> Iterator[Iterator[bytes]]:
        """POST with the device credential and read a successful answer as a byte stream
        of ``media_type``, inside a ``with`` block (the connection closes when it ends).
        Refusals are mapped as in ``post``; a transport error while reading is
        ``Offline``. ``body`` may be a function of the protocol version, as in ``post``."""
        build = body if callable(body) else (lambda _version: body)
        headers = self._headers(path, auth=True)
        for attempt in range(2):
            with self._open_stream(path, build(self._version), headers, timeout) as response:
                self.closing = response.headers.get(CLOSING_HEADER)
                if response.is_success:
                    kind = response.headers.get("content-type", "").split(";")[0].strip()
                    if kind != media_type:
                        raise ServerError(
                            f"POST {path}: HTTP {response.status_code} answered {kind!r}, "
                            f"expected {media_type!r}"
                        )
                    yield self._chunks(path, response)
                    return
                self._read(path, response)
                version_refused = _version_refusal(response)
                if (
                    attempt == 0
                    and version_refused is not None
                    and self._negotiate(version_refused)
                ):
                    continue
                self._refused(path, response, self._json(path, response))
        raise AssertionError("unreachable: the second attempt answers or raises")

    @contextmanager
    def _open_stream(
        self, path: str, body: BaseModel, headers: dict[str, str], timeout: float | None
    ) -> Iterator[httpx.Response]:
        content = self._render(path, body)
        try:
            stream = self._http.stream(
                "POST",
                path,
                content=content,
                headers=headers,
                timeout=self._http.timeout if timeout is None else timeout,
            )
            response = stream.__enter__()
        except httpx.TransportError as exc:
            raise self._offline(path, exc) from exc
        try:
            yield response
        finally:
            stream.__exit__(None, None, None)

    def _chunks(self, path: str, response: httpx.Response) -> Iterator[bytes]:
        try:
            yield from response.iter_bytes()
        except httpx.TransportError as exc:
            if isinstance(exc, httpx.ReadTimeout):
                raise self._offline(path, exc) from exc
            raise Offline(
                f"the connection to the cloud at {self.base_url} broke while reading the "
                f"answer to POST {path}: {type(exc).__name__}: {exc}"
            ) from exc

    def _read(self, path: str, response: httpx.Response) -> None:
        try:
            response.read()
        except httpx.TransportError as exc:
            raise self._offline(path, exc) from exc

    def _headers(self, path: str, auth: bool) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if auth:
            if self.credential is None:
                raise NotEnrolled(
                    f"POST {path} needs a device credential; enroll this device first"
                )
            headers["authorization"] = f"Bearer {self.credential}"
        return headers

    def _render(self, path: str, body: BaseModel) -> str:
        try:
            return render_json(body, self._version)
        except FieldNotInVersion as exc:
            raise NeedsNewerProtocol(
                f"POST {path}: {exc}, but the cloud at {self.base_url} is spoken to in "
                f"version {self._version}; nothing was sent"
            ) from exc

    def _offline(
        self, path: str, exc: httpx.TransportError, timeout: float | None = None
    ) -> Offline:
        if isinstance(exc, httpx.ReadTimeout):
            waited = self._http.timeout.read if timeout is None else timeout
            return CloudSlow(self.base_url, path, waited, f"{type(exc).__name__}: {exc}")
        return Offline(
            f"cannot reach the cloud at {self.base_url} (POST {path}): {type(exc).__name__}: {exc}"
        )

    def _send(
        self, path: str, body: BaseModel, headers: dict[str, str], timeout: float | None
    ) -> httpx.Response:
        content = self._render(path, body)
        try:
            response = self._http.post(
                path,
                content=content,
                headers=headers,
                timeout=self._http.timeout if timeout is None else timeout,
            )
        except httpx.TransportError as exc:
            raise self._offline(path, exc, timeout) from exc
        self.closing = response.headers.get(CLOSING_HEADER)
        return response

    def _negotiate(self, refusal: ErrorBody) -> bool:
        """Move to the highest version both sides speak; False if that is the one refused."""
        theirs = refusal.supported_versions
        common = common_version(self.protocol_versions, theirs)
        if common is None:
            raise NoCommonProtocolVersion(
                self.base_url, self.protocol_versions, theirs, refusal.message
            )
        if common == self._version:
            return False  # the cloud refused a version it claims; report its refusal as is
        self._version = common
        return True

    def _json(self, path: str, response: httpx.Response) -> Any:
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServerError(
                f"POST {path}: HTTP {response.status_code} with a body that is not JSON: "
                f"{response.text[:200]!r}"
            ) from None

    def _refused(self, path: str, response: httpx.Response, raw: Any) -> NoReturn:
        """Raise the device error for a non-2xx answer (its ``ErrorBody`` mapped once)."""
        try:
            error = ErrorBody.model_validate(raw)
        except ValidationError:
            raise ServerError(
                f"POST {path}: HTTP {response.status_code} without a protocol error body: "
                f"{str(raw)[:200]}"
            ) from None
        raise refusal(error.code.value, error.message, response.status_code)

    def _parse(
        self,
        path: str,
        response: httpx.Response,
        response_model: type[ResponseT],
        *,
        versions: VersionRange | None = None,
    ) -> ResponseT:
        raw = self._json(path, response)
        if not response.is_success:
            self._refused(path, response, raw)
        if not isinstance(raw, dict):
            raise ServerError(f"POST {path}: expected a JSON object, got {type(raw).__name__}")
        try:
            version = peek_version(raw, versions or (self._version, self._version))
            return parse(response_model, raw, version)
        except UnsupportedProtocolVersion as exc:
            raise ServerError(
                f"POST {path}: the request went out in protocol version {self._version}, but "
                f"the answer carries version {exc.version!r}"
            ) from exc
        except FieldNotInVersion as exc:
            raise ServerError(f"POST {path}: the answer is not valid: {exc}") from exc
        except ValidationError as exc:
            if (unknown := _unknown_change(exc, raw)) is not None:
                raise unknown from exc
            raise ServerError(
                f"POST {path}: the answer is not a valid {response_model.__name__}: {exc}"
            ) from exc


def _unknown_change(exc: ValidationError, raw: dict[str, Any]) -> UnknownChangeKind | None:
    """The refusal for a pulled change whose ``kind`` no change model of this device has
    (the discriminated union did not match its tag), else None."""
    for error in exc.errors():
        loc = error["loc"]
        if error["type"] != "union_tag_invalid" or len(loc) != 2 or loc[0] != "changes":
            continue
        changes = raw.get("changes")
        index = loc[1]
        if isinstance(changes, list) and isinstance(index, int) and index < len(changes):
            change = changes[index]
            if isinstance(change, dict):
                return UnknownChangeKind(change.get("kind"), change.get("seq"))
    return None


def _version_refusal(response: httpx.Response) -> ErrorBody | None:
    """The cloud's ErrorBody if it refused the request's protocol version, else None."""
    if response.status_code != 400:
        return None
    try:
        raw: Any = response.json()
        error = ErrorBody.model_validate(raw)
    except (ValueError, ValidationError):
        return None
    return error if error.code is ErrorCode.UNSUPPORTED_PROTOCOL_VERSION else None
