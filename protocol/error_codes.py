"""The error codes of the wire: what a refusal from the cloud says it is.

Invariant: every code the cloud can answer is a member here, once; ``protocol.messages``
carries them in ``ErrorBody`` (and re-exports the enum), ``device.errors`` gives each
its own class. Its own module so that a device reading its records alone (``device
list``) knows the codes without building every wire message.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    UNSUPPORTED_PROTOCOL_VERSION = "unsupported_protocol_version"
    MALFORMED_REQUEST = "malformed_request"
    REQUEST_TOO_LARGE = "request_too_large"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    PULL_REQUIRED = "pull_required"
    ENROLLMENT_REFUSED = "enrollment_refused"
    MALFORMED_CURSOR = "malformed_cursor"
    ACCOUNT_KEY_MISMATCH = "account_key_mismatch"
    DEVICE_REVOKED = "device_revoked"
    RESYNC_REQUIRED = "resync_required"
    ACCOUNT_ENDED = "account_ended"  # the space ended: the device must wipe its copy
    SERVICE_CLOSED = "service_closed"  # the service closed: only export stays open
    STRONG_AUTH_REQUIRED = "strong_auth_required"  # no account key, or a bad proof
    EXPORT_ID_USED = "export_id_used"  # 409: an export id starts one export only
    EXPORT_UNAVAILABLE = "export_unavailable"  # 503: a store it needs cannot be read
    PIN_REFUSED = "pin_refused"  # 409 (protocol 3): forgotten record, or too many pins
    STORE_TOO_NEW = "store_too_new"  # 503: a newer memsync migrated the store; this one stops
