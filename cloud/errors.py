"""The cloud's exceptions, one class per answer the HTTP boundary can give.

Invariant: every error names the offending id or field and the reason; ``cloud.app``
maps each class to its HTTP status and ``protocol.messages.ErrorCode`` in one place.
"""

from __future__ import annotations

from datetime import datetime

from protocol.messages import ErrorCode


class CloudError(Exception):
    """Base of every error the cloud raises on purpose."""

    status: int = 500
    code: ErrorCode | None = None


class MalformedRequest(CloudError):
    status = 400
    code = ErrorCode.MALFORMED_REQUEST


class MalformedCursorError(CloudError):
    status = 400
    code = ErrorCode.MALFORMED_CURSOR


class Unauthorized(CloudError):
    status = 401
    code = ErrorCode.UNAUTHORIZED


class DeviceRevoked(CloudError):
    """The credential belongs to a device the account revoked: refused, and the device
    wipes its copy of the memory when it hears this."""

    status = 401
    code = ErrorCode.DEVICE_REVOKED


class EnrollmentRefused(CloudError):
    status = 403
    code = ErrorCode.ENROLLMENT_REFUSED


class NotFound(CloudError):
    status = 404
    code = ErrorCode.NOT_FOUND


class PullRequired(CloudError):
    status = 409
    code = ErrorCode.PULL_REQUIRED

    def __init__(self, device_id: str, event_ids: list[int]) -> None:
        self.device_id = device_id
        self.event_ids = event_ids
        shown = ", ".join(str(e) for e in event_ids[:20])
        more = "" if len(event_ids) <= 20 else f" and {len(event_ids) - 20} more"
        super().__init__(
            f"device {device_id} has not acknowledged key-destruction event(s) {shown}{more}; "
            "pull and acknowledge them before pushing (nothing in this push was applied)"
        )


class ResyncRequired(CloudError):
    """A pull's cursor is below the space's feed floor: compaction may have removed a
    key-destruction event the device never saw, so it must rebuild from the start."""

    status = 410
    code = ErrorCode.RESYNC_REQUIRED

    def __init__(self, cursor: str, after: int, floor: int) -> None:
        self.after = after
        self.floor = floor
        super().__init__(
            f"cursor {cursor[:80]!r} (seq {after}) is below this space's feed floor (seq "
            f"{floor}): changes up to seq {floor} were compacted away, so incremental sync "
            "could miss a key destruction; pull again from the start (no cursor) and rebuild "
            "(nothing was changed)"
        )


class AccountKeyMismatch(CloudError):
    """A different account key is already registered for the space."""

    status = 409
    code = ErrorCode.ACCOUNT_KEY_MISMATCH


class StrongAuthRequired(CloudError):
    """A request that needs the account key (an export, deleting the account) came
    without a registered account key, or with a proof that does not verify; nothing
    changed."""

    status = 403
    code = ErrorCode.STRONG_AUTH_REQUIRED


class ExportIdUsed(CloudError):
    """An export id that already started an export (an export id starts one only)."""

    status = 409
    code = ErrorCode.EXPORT_ID_USED


class ExportUnavailable(CloudError):
    """A store an export needs could not be read, even after waiting; names the store."""

    status = 503
    code = ErrorCode.EXPORT_UNAVAILABLE


class PinRefused(CloudError):
    """A pin that cannot be: the record is permanently forgotten, or the device has as
    many pins as it may. Nothing was pinned."""

    status = 409
    code = ErrorCode.PIN_REFUSED


class ExportIncomplete(CloudError):
    """An item the package needs cannot be read while it streams (its data key is
    missing, or its content does not open): the stream ends with an error chunk naming
    the item, never with a package that silently lacks it. Never an HTTP status: the
    200 has been sent by then."""


class AccountEnded(CloudError):
    """The caller's space ended (the user deleted the account, or the service shut
    down): every route but ``/v1/wiped`` refuses, and the device wipes its copy."""

    status = 410
    code = ErrorCode.ACCOUNT_ENDED

    def __init__(self, space_id: str, ended_at: datetime, why: str) -> None:
        self.space_id = space_id
        self.ended_at = ended_at
        super().__init__(
            f"the account of space {space_id} ended at {ended_at.isoformat()}: {why}; all "
            "of its memory is unreadable (every key destroyed), so this device must wipe its "
            "copy of the memory (each device does when it hears this, then tells the cloud)"
        )


class ServiceClosed(CloudError):
    """The service closed (after ``closes_at``): writes are refused until its data is
    destroyed at ``export_until``; export and pulls stay open. Nothing changed."""

    status = 503
    code = ErrorCode.SERVICE_CLOSED


class RequestTooLarge(CloudError):
    status = 413
    code = ErrorCode.REQUEST_TOO_LARGE


class BodyTooSlow(CloudError):
    """The request body did not arrive in time (``CloudConfig.body_timeout``)."""

    status = 408
    code = ErrorCode.MALFORMED_REQUEST


class UnsupportedMediaType(CloudError):
    """A body declared as something other than JSON (the code stays ``malformed_request``)."""

    status = 415
    code = ErrorCode.MALFORMED_REQUEST


class AlreadyExists(CloudError):
    """A name or id that must be unique is taken (CLI only; never crosses the wire)."""

    status = 409


class ClosingRefused(CloudError):
    """An announcement or cancellation of the service's closing that cannot be (dates in
    the past or out of order, nothing to cancel, too late); CLI only, nothing stored."""

    status = 409


class StoreError(CloudError):
    """The record store is in a state this code does not understand (a bug or a bad file)."""


class StoreTooNew(StoreError):
    """The record store was migrated by a newer memsync than this one: this process
    neither opens it nor serves from it (HTTP 503), and changes nothing in it."""

    status = 503
    code = ErrorCode.STORE_TOO_NEW

    def __init__(self, store: str, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the record store {store} is at schema version {found}, migrated by a newer "
            f"memsync; this one knows versions up to {known}, so it refuses to open or serve "
            "it and changed nothing (run the newer memsync)"
        )


class KeyStoreError(CloudError):
    """The key store could not do what was asked (bad master key, missing space key)."""


class ModelMissing(CloudError):
    """The sentence embedder's files are not there (a deployment error, so HTTP 500)."""

    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"the sentence embedder is missing: {path} not found; run `make model` to build "
            "it (or set MEMSYNC_MODEL_DIR to a folder holding model.onnx and tokenizer.json)"
        )


class DetectorMissing(CloudError):
    """The memory-candidate detector's model file is not there (a deployment error, HTTP 500)."""

    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"the memory-candidate detector is missing: {path} not found; run `make model` to "
            "build it (or set MEMSYNC_DETECTOR_DIR to a folder holding model.onnx)"
        )


class SensitivityModelMissing(CloudError):
    """The cloud's sensitivity classifier file is not there (a deployment error, HTTP 500)."""

    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"the cloud's sensitivity classifier is missing: {path} not found; run `make model` "
            "to build it (or set MEMSYNC_SENSITIVITY_DIR to a folder holding model.json)"
        )


class StoreUnreachable(StoreError):
    """The record store cannot be opened: the server is unreachable, the database does
    not exist, or the login is refused. One line names the URL (password masked) and the
    reason; the CLI exits 2 on it, with no traceback."""

    def __init__(self, shown_url: str, reason: str) -> None:
        self.shown_url = shown_url
        self.reason = reason
        super().__init__(f"the record store {shown_url} cannot be opened: {reason}")


class SettingsError(CloudError):
    """A setting (flag, environment variable or settings file) has a bad value: the
    message names the setting, its environment variable, the value and the reason."""
