"""Accounts: users (spaces), enrollment, device credentials, the account key, revocation
and wipe confirmations.

Invariants:
- An enrollment code is single use and expires (``ENROLLMENT_CODE_TTL``); only its
  SHA-256 is stored, like a device credential's. A code of an ended account enrolls
  nothing.
- A credential names its device and its space; ``authenticate`` refuses an unknown one
  (``Unauthorized``), a revoked device (``DeviceRevoked``) and every device of an ended
  space (``AccountEnded``); once the service closed, a space the closing has not
  reached yet is ended on the spot.
- The account key is set once: the same key again is a no-op, a different one is
  refused (``AccountKeyMismatch``) and nothing changes.
- Only a revoked device's credential, or that of any device of an ended space, confirms
  a wipe (``confirm_wipe``); a wiped device is pending for no forget.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta

from cloud.account_end import AccountEnd, EndReason
from cloud.admission import Admission, end_row
from cloud.errors import (
    AccountKeyMismatch,
    AlreadyExists,
    DeviceRevoked,
    EnrollmentRefused,
    MalformedRequest,
    NotFound,
    Unauthorized,
)
from cloud.keystore import SqliteKeyStore
from cloud.store import SqlStore
from cloud.store.base import DeviceRow, SpaceEndRow
from protocol.ids import is_id, make_id
from protocol.messages import (
    AccountKeyRequest,
    AccountKeyResponse,
    DevicesResponse,
    DeviceStatus,
    EnrollRequest,
    EnrollResponse,
    ServiceMode,
    WipedResponse,
)

ENROLLMENT_CODE_TTL = timedelta(hours=24)
MAX_NAME_CHARS = 64
PUBLIC_KEY_BYTES = 32
ACCOUNT_KEY_BYTES = 32


def secret_hash(secret: str) -> str:
    """What the store keeps of an enrollment code or a credential."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class Accounts:
    """Users, enrollment and devices, over the record store's accounts room."""

    def __init__(
        self,
        store: SqlStore,
        key_store: Callable[[], SqliteKeyStore],
        clock: Callable[[], datetime],
        random_bytes: Callable[[int], bytes],
        admission: Admission,
        *,
        check_writable: Callable[[datetime, str], None],
        mode: Callable[[], ServiceMode],
        end_space: Callable[[str, EndReason], AccountEnd],
    ) -> None:
        self.store = store
        self._key_store = key_store  # read at each call: an operator may reopen it
        self._clock = clock
        self._random = random_bytes
        self._admission = admission
        self._check_writable = check_writable
        self._mode = mode
        self._end_space = end_space

    @property
    def key_store(self) -> SqliteKeyStore:
        return self._key_store()

    def add_user(self, name: str) -> tuple[str, str]:
        """Create a space for ``name``; return ``(space_id, one-time enrollment code)``."""
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS:
            raise MalformedRequest(
                f"user name {name[:80]!r} must be 1 to {MAX_NAME_CHARS} characters"
            )
        if is_id("sp", name):
            raise MalformedRequest(f"user name {name!r} looks like a space id; choose another")
        now = self._clock()
        self._check_writable(now, f"creating user {name!r}")
        space_id = make_id("sp", self._random(15))
        code = self._new_code()
        with self.store.session() as s:
            if s.space_by_name(name) is not None:
                raise AlreadyExists(f"a user named {name!r} already exists")
            s.create_space(space_id, name, now)
            s.add_enrollment_code(space_id, secret_hash(code), now, now + ENROLLMENT_CODE_TTL)
            self.key_store.create_space_key(space_id)
        return space_id, code

    def new_enrollment_code(self, space_id: str) -> str:
        """Another one-time code for an existing space (valid 24 hours)."""
        now = self._clock()
        code = self._new_code()
        with self.store.session() as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            self._admission.check_open(s, space_id)
            s.add_enrollment_code(space_id, secret_hash(code), now, now + ENROLLMENT_CODE_TTL)
        return code

    def _new_code(self) -> str:
        return base64.b32encode(self._random(20)).decode("ascii").lower()

    def enroll(self, req: EnrollRequest) -> EnrollResponse:
        """Enroll a device; the answer carries the space's account key, if registered."""
        if len(req.public_key) != PUBLIC_KEY_BYTES:
            raise MalformedRequest(
                f"field 'public_key': an X25519 public key is {PUBLIC_KEY_BYTES} bytes, "
                f"got {len(req.public_key)}"
            )
        now = self._clock()
        code_hash = secret_hash(req.code)
        with self.store.session() as s:
            row = s.enrollment_code(code_hash)
            if row is None:
                raise EnrollmentRefused("enrollment code is unknown")
            if row.used_at is not None:
                raise EnrollmentRefused("enrollment code was already used; codes are single-use")
            if now >= row.expires_at:
                raise EnrollmentRefused(
                    f"enrollment code expired at {row.expires_at.isoformat()}; ask for a new one"
                )
            if s.space_end(row.space_id) is not None:
                raise EnrollmentRefused("enrollment code is for an account that has ended")
            device_id = make_id("dev", self._random(15))
            credential = "cred_" + base64.urlsafe_b64encode(self._random(32)).decode().rstrip("=")
            if not s.use_enrollment_code(code_hash, device_id, now):
                raise EnrollmentRefused("enrollment code was already used; codes are single-use")
            s.add_device(
                row.space_id,
                device_id,
                req.device_name,
                req.public_key,
                secret_hash(credential),
                now,
            )
            account_key = s.account_key(row.space_id)
        return EnrollResponse(
            device_id=device_id,
            space_id=row.space_id,
            credential=credential,
            account_key=account_key,
        )

    def register_account_key(
        self, space_id: str, device_id: str, req: AccountKeyRequest
    ) -> AccountKeyResponse:
        """Register the account's verify key: the first sets it, the same key again is a
        no-op, a different one is refused (``AccountKeyMismatch``)."""
        if len(req.account_key) != ACCOUNT_KEY_BYTES:
            raise MalformedRequest(
                f"field 'account_key': an Ed25519 verify key is {ACCOUNT_KEY_BYTES} bytes, "
                f"got {len(req.account_key)}"
            )
        with self.store.session(space_id, lock=True) as s:
            self._admission.enrolled(s, space_id, device_id)
            registered = s.account_key(space_id)
            if registered is None:
                s.set_account_key(space_id, req.account_key)
                registered = req.account_key
            elif registered != req.account_key:
                raise AccountKeyMismatch(
                    f"space {space_id} already has a different account key registered; "
                    "the account passphrase is not this account's (nothing was changed)"
                )
        return AccountKeyResponse(account_key=registered)

    def authenticate(self, credential: str) -> tuple[str, str]:
        """``(space_id, device_id)`` of a device credential; ``Unauthorized`` otherwise,
        ``AccountEnded`` when its space ended (once the service closed, the space is
        ended here if the closing has not reached it yet)."""
        device, end = self.device_of(credential)
        if end is None and self._mode() is ServiceMode.CLOSED:
            end = end_row(self._end_space(device.space_id, EndReason.SERVICE_SHUTDOWN))
        if end is not None:
            raise self._admission.ended(end)
        if device.revoked_at is not None:
            raise DeviceRevoked(
                f"device {device.device_id} was revoked at {device.revoked_at.isoformat()}; "
                "it must wipe its copy of the memory"
            )
        return device.space_id, device.device_id

    def device_of(self, credential: str) -> tuple[DeviceRow, SpaceEndRow | None]:
        """The device a credential belongs to, revoked or not, and the end of its space
        (None while it is open); ``Unauthorized`` if none."""
        if not credential:
            raise Unauthorized("no device credential was given")
        with self.store.reader() as s:  # a read: never waits behind a writer
            device = s.device_by_credential(secret_hash(credential))
            end = None if device is None else s.space_end(device.space_id)
        if device is None:
            raise Unauthorized("the device credential is unknown")
        return device, end

    def revoke_device(self, space_id: str, device_id: str) -> None:
        """Revoke a device: from now on its credential is refused (401 ``device_revoked``)
        and, when it next reaches the cloud, it wipes its copy of the memory."""
        with self.store.session(space_id, lock=True) as s:
            if not s.revoke_device(space_id, device_id, self._clock()):
                raise NotFound(f"no device {device_id} to revoke in space {space_id}")

    def confirm_wipe(self, credential: str) -> WipedResponse:
        """A revoked device, or a device of an ended space, confirms it wiped its copy: it
        is marked wiped (the first confirmation's time stays) and is pending for no
        forget, nor for the end of its account, from then on.

        Only such a device's credential is accepted: an unknown one is
        ``Unauthorized``; a device that is not revoked, in a space that has not ended,
        gets ``NotFound`` (it has no wipe to confirm) and nothing changes. The
        credential alone names the device and its space, so the confirmation never
        reaches another space."""
        device, end = self.device_of(credential)
        if device.revoked_at is None and end is None:
            raise NotFound(
                f"device {device.device_id} is not revoked and its account has not ended: "
                "there is no wipe to confirm (nothing was changed)"
            )
        with self.store.session(device.space_id, lock=True) as s:
            wiped_at = s.mark_wiped(device.space_id, device.device_id, self._clock())
        if wiped_at is None:  # the device row is gone, or not revoked nor ended: a store bug
            raise NotFound(f"no revoked device {device.device_id} in its space")
        return WipedResponse(device_id=device.device_id, wiped_at=wiped_at)

    def find_space(self, name_or_id: str) -> str:
        with self.store.session() as s:
            if is_id("sp", name_or_id) and s.space_exists(name_or_id):
                return name_or_id
            found = s.space_by_name(name_or_id)
        if found is None:
            raise NotFound(f"no user or space named {name_or_id!r}")
        return found

    def devices(self, space_id: str) -> DevicesResponse:
        """Every device ever enrolled in the caller's space (revoked ones included)."""
        with self.store.session(space_id) as s:
            rows = s.device_statuses(space_id)
        return DevicesResponse(
            devices=[DeviceStatus.model_validate(r, from_attributes=True) for r in rows]
        )
