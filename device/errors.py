"""Errors the device raises to its callers (agent, CLI, simulator).

Invariants: every message names the offending id, file or value and the reason;
an error raised by a local write means nothing was changed (the transaction rolled
back); network and server errors are mapped here once, at the transport boundary.
Every ``ErrorCode`` the cloud can answer has its own ``ServerRefused`` subclass
(``refusal`` maps it once, in ``device.client``), so callers catch classes; ``code``,
``message`` and ``status`` keep the wire's values.
"""

from __future__ import annotations

from typing import Any

from protocol.error_codes import ErrorCode


class DeviceError(Exception):
    """Base of every error the device package raises on purpose."""


class WrongPassphrase(DeviceError):
    """The database file exists but does not open with the passphrase given."""

    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"the passphrase does not open the device database {path}; nothing was read or changed"
        )


class EmptyPassphrase(DeviceError):
    """An empty passphrase would leave the database unencrypted, so it is refused."""

    def __init__(self) -> None:
        super().__init__(
            "the passphrase is empty; an empty SQLCipher key means no encryption, so it is refused"
        )


class DeviceNotInitialised(DeviceError):
    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(f"no device database at {path}; create one first (memsync device init)")


class DeviceAlreadyExists(DeviceError):
    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"a device database already exists at {path}; open it instead of creating one"
        )


class SchemaTooNew(DeviceError):
    """The database was migrated by a newer memsync than this one."""


class MigrationFailed(DeviceError):
    """A schema migration failed; it was rolled back as a whole."""


class NotEnrolled(DeviceError):
    """The operation needs a cloud enrollment this device does not have yet."""


class AlreadyEnrolled(DeviceError):
    pass


class NoCloud(DeviceError):
    """No cloud URL is configured for this device."""


class UnknownRecord(DeviceError):
    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(f"record {record_id} is not held on this device")


class Refused(DeviceError):
    """The transition rules refused a local operation; nothing was changed.

    ``receipt`` is the refusal receipt (``protocol.operations.Receipt``) when the
    refusal came from ``protocol.rules.decide``.
    """

    def __init__(self, code: str, reason: str, *, receipt: Any = None) -> None:
        self.code = code
        self.reason = reason
        self.receipt = receipt
        super().__init__(f"refused ({code}): {reason}")


class TemporaryMode(DeviceError):
    """Temporary mode is on: nothing from this session is written, so a write refuses."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(
            f"temporary mode is on: {what} was not done and nothing was written "
            "(turn temporary mode off to keep things)"
        )


class Offline(DeviceError):
    """The cloud could not be reached (connection error or timeout)."""


class CloudSlow(Offline):
    """The request reached the cloud, but its answer did not come within the timeout
    (a read timeout). An ``Offline``, so every caller that copes with an unreachable
    cloud copes with a slow one; nothing was lost: a write stays queued, and a push
    the cloud did apply is recognised by its op ids when it is sent again."""

    def __init__(self, base_url: str, path: str, timeout: float | None, detail: str) -> None:
        self.base_url = base_url
        self.path = path
        self.timeout = timeout
        waited = "" if timeout is None else f" within {timeout:g} s"
        super().__init__(
            f"the cloud at {base_url} is slow: it did not answer POST {path}{waited} "
            f"({detail}); nothing was lost, try again later"
        )


class ServerRefused(DeviceError):
    """The cloud answered a request with an ErrorBody (non-2xx)."""

    def __init__(self, code: str, message: str, status: int) -> None:
        self.code = code
        self.message = message
        self.status = status
        super().__init__(f"the cloud refused the request (HTTP {status}, {code}): {message}")


# --- one class per ``ErrorCode``: ``device.client`` maps a refusal once (``refusal``),
# callers catch the class and never compare ``code`` strings. ``code`` stays the wire's.


class ProtocolVersionRefused(ServerRefused):
    """400 ``unsupported_protocol_version`` (the client negotiates it first)."""


class MalformedRequest(ServerRefused):
    """400 ``malformed_request``: the cloud could not read the request."""


class RequestTooLarge(ServerRefused):
    """413 ``request_too_large``."""


class Unauthorized(ServerRefused):
    """401 ``unauthorized``: no credential, or one the cloud does not know."""


class NotFound(ServerRefused):
    """404 ``not_found``."""


class PullRequired(ServerRefused):
    """409 ``pull_required``: the device must pull (and acknowledge) before it pushes."""


class EnrollmentRefused(ServerRefused):
    """403 ``enrollment_refused``: the enrollment code is unknown, used or expired."""


class MalformedCursor(ServerRefused):
    """400 ``malformed_cursor``."""


class AccountKeyMismatch(ServerRefused):
    """409 ``account_key_mismatch``: another account key is registered for the space."""


class DeviceRevokedRefused(ServerRefused):
    """``device_revoked``: this device must wipe its copy (``DeviceRevoked`` follows)."""


class ResyncRequired(ServerRefused):
    """``resync_required``: the cursor is below the cloud's compacted feed floor."""


class AccountEndedRefused(ServerRefused):
    """410 ``account_ended``: the space ended; the device wipes (``AccountEnded`` follows)."""


class ServiceClosed(ServerRefused):
    """503 ``service_closed``: the service closed; only export and reads stay open."""


class PinRefused(ServerRefused):
    """409 ``pin_refused``: a forgotten record, or too many pins."""


class StoreTooNew(ServerRefused):
    """503 ``store_too_new``: a newer memsync migrated the cloud's store."""


class PushDidNotSettle(PullRequired):
    """A push was answered ``pull_required`` again after pulls that acknowledged
    everything new, or more often than the bound; the ops stay queued."""

    def __init__(self, message: str, *, status: int = 409) -> None:
        super().__init__("pull_required", message, status)


class NoCommonProtocolVersion(ProtocolVersionRefused):
    """The cloud accepts no protocol version this device speaks; nothing was sent."""

    def __init__(
        self, base_url: str, mine: tuple[int, int], cloud: tuple[int, int], message: str
    ) -> None:
        self.base_url = base_url
        self.mine = mine
        self.cloud = cloud
        DeviceError.__init__(
            self,
            f"the cloud at {base_url} accepts protocol versions {cloud[0]} to {cloud[1]}; "
            f"this device speaks {mine[0]} to {mine[1]}: no version in common, so nothing "
            f"was sent or changed (the cloud said: {message})",
        )
        self.code = "unsupported_protocol_version"
        self.message = message
        self.status = 400


class NeedsNewerProtocol(DeviceError):
    """A request needs a field the protocol version spoken with the cloud lacks."""


class CopyWiped(DeviceError):
    """The cloud told this device to wipe its copy of the memory, and it did."""


class DeviceRevoked(CopyWiped):
    """The account revoked this device: its copy of the memory was wiped."""


class AccountEnded(CopyWiped):
    """The account ended (its user deleted it, or the service shut down): this device's
    copy of the memory, queued changes that were never sent included, was wiped."""


class ServerError(DeviceError):
    """The cloud answered with something that is not a valid protocol message."""


class ChangeDoesNotOpen(DeviceError):
    """A pulled change could not be opened or parsed; the page was not applied."""


class UnknownChangeKind(ServerError):
    """A pulled page carries a change of a kind this device does not know: the whole
    page is refused and the cursor stays before it (a newer cloud, or a bug)."""

    def __init__(self, kind: object, seq: object) -> None:
        self.kind = str(kind)[:80]
        self.seq = seq
        super().__init__(
            f"pulled change seq {str(seq)[:40]} is of kind {self.kind!r}, which this device "
            "does not know; the page was not applied and the cursor did not move"
        )


class AppendOnlyViolation(DeviceError):
    """Something tried to change or delete sealed content outside the shredding path."""


class InvalidOperation(DeviceError):
    """An operation built from the caller's input does not validate; nothing was changed."""


class ModelMissing(DeviceError):
    """The sentence embedder's files are not there (``make model`` builds them)."""

    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"the sentence embedder is missing: {path} not found; run `make model` to build "
            "it (or set MEMSYNC_MODEL_DIR to a folder holding model.onnx and tokenizer.json)"
        )


class DetectorMissing(DeviceError):
    """The memory-candidate detector's model file is not there (``make model`` builds it)."""

    def __init__(self, path: object) -> None:
        self.path = path
        super().__init__(
            f"the memory-candidate detector is missing: {path} not found; run `make model` to "
            "build it (or set MEMSYNC_DETECTOR_DIR to a folder holding model.onnx)"
        )


class ImportRefused(DeviceError):
    """A file given to ``import`` was refused; nothing was written (no episode, no
    record, no queued op, no ledger row). ``reason`` says why, naming the file."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"import of {path} refused, nothing was changed: {reason}")


class PackageTampered(ImportRefused):
    """A signed package whose lines are not what was signed (edited, cut, moved)."""


class PackageNotSigned(ImportRefused):
    """A package unsigned or signed by another account, without ``allow_unsigned``."""


class PackageUnreadable(ImportRefused):
    """Not a file, or it cannot be read."""


class PackageTooLarge(ImportRefused):
    """Larger than ``device.importing.MAX_PACKAGE_BYTES``."""


class PackageMalformed(ImportRefused):
    """Not UTF-8, not JSON, a key given twice, or nested too deeply to read."""


class NotAPackage(ImportRefused):
    """JSON, but not a memsync export package."""


class PackageVersionUnsupported(ImportRefused):
    """A memsync export package of a schema version this memsync does not read."""


class PackageInvalid(ImportRefused):
    """A package that fails the export package's models (the path and reason named)."""


class PackageTotalsMismatch(ImportRefused):
    """The totals closing the package disagree with what it holds."""


class PackageAlreadyImported(ImportRefused):
    """This export id was already imported into this device (see the import ledger)."""


class StrongAuthRequired(ServerRefused):
    """403 ``strong_auth_required``: the cloud has no account key for the space, or the
    account-key proof did not verify (the cloud's message says which)."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(code, message, status)
        DeviceError.__init__(
            self,
            f"the cloud asks for strong authentication (HTTP {status}, {code}): {message}; "
            "nothing was started",
        )


class ExportIdUsed(ServerRefused):
    """409 ``export_id_used``: an export id starts one export only."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(code, message, status)
        DeviceError.__init__(
            self,
            f"the cloud refused the export id (HTTP {status}, {code}): {message}; "
            "an export id starts one export only, so start a new export",
        )


class ExportUnavailable(ServerRefused):
    """503 ``export_unavailable``: a store the export needs cannot be read."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(code, message, status)
        DeviceError.__init__(
            self,
            f"the cloud cannot export now (HTTP {status}, {code}): {message}; "
            "no package was made, try again later",
        )


_REFUSALS: dict[str, type[ServerRefused]] = {
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: ProtocolVersionRefused,
    ErrorCode.MALFORMED_REQUEST: MalformedRequest,
    ErrorCode.REQUEST_TOO_LARGE: RequestTooLarge,
    ErrorCode.UNAUTHORIZED: Unauthorized,
    ErrorCode.NOT_FOUND: NotFound,
    ErrorCode.PULL_REQUIRED: PullRequired,
    ErrorCode.ENROLLMENT_REFUSED: EnrollmentRefused,
    ErrorCode.MALFORMED_CURSOR: MalformedCursor,
    ErrorCode.ACCOUNT_KEY_MISMATCH: AccountKeyMismatch,
    ErrorCode.DEVICE_REVOKED: DeviceRevokedRefused,
    ErrorCode.RESYNC_REQUIRED: ResyncRequired,
    ErrorCode.ACCOUNT_ENDED: AccountEndedRefused,
    ErrorCode.SERVICE_CLOSED: ServiceClosed,
    ErrorCode.STRONG_AUTH_REQUIRED: StrongAuthRequired,
    ErrorCode.EXPORT_ID_USED: ExportIdUsed,
    ErrorCode.EXPORT_UNAVAILABLE: ExportUnavailable,
    ErrorCode.PIN_REFUSED: PinRefused,
    ErrorCode.STORE_TOO_NEW: StoreTooNew,
}


def refusal(code: str, message: str, status: int) -> ServerRefused:
    """The device error for a cloud's ``ErrorBody``: the code's own ``ServerRefused``
    subclass (every ``ErrorCode`` has one), else ``ServerRefused`` itself."""
    return _REFUSALS.get(code, ServerRefused)(code, message, status)


class ExportFailed(DeviceError):
    """An export did not complete: nothing of it was kept in the output directory."""

    def __init__(self, export_id: str, reason: str) -> None:
        self.export_id = export_id
        self.reason = reason
        super().__init__(f"export {export_id} failed and no file of it was kept: {reason}")


class ExportDirectoryInvalid(DeviceError):
    """The output directory of an export does not exist or is not a directory."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot export to {path}: {reason}; nothing was asked or written")


class InspectorRefused(DeviceError):
    """The inspector page refused a request (bad host, no session, cross-site POST);
    nothing was read or changed."""

    def __init__(self, path: str, reason: str, *, status: int = 403) -> None:
        self.path = path
        self.reason = reason
        self.status = status
        super().__init__(f"inspector request to {path} refused: {reason}; nothing was changed")
