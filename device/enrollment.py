"""Enrollment and the account key: joining a space with a one-time code, and
registering the key derived from the account passphrase.

Invariants:
- A device enrolls once: a second enrollment is refused (``AlreadyEnrolled``) before
  anything is sent. The enrollment answer (device id, space id, credential, the
  account key the cloud already holds) is stored in ONE transaction.
- The account key is derived from the passphrase AND the space id, known only from
  the enrollment answer, so it is registered right after; if that fails the
  enrollment stands and ``register_account`` can be called again.
- A key already registered is checked, never replaced: a passphrase that does not
  match it is refused (``STRONG_AUTH_REQUIRED``) and nothing is stored. The device
  stores the public verify key only (``device.account``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from pydantic import ValidationError

from device import account, keys, store
from device.client import CloudClient
from device.db import Database
from device.errors import AccountKeyMismatch, AlreadyEnrolled, NotEnrolled, Refused
from device.invalid import invalid
from protocol import strongauth
from protocol.messages import (
    AccountKeyRequest,
    AccountKeyResponse,
    EnrollRequest,
    EnrollResponse,
)
from protocol.operations import RefusalCode


def require_enrolled(db: Database, what: str) -> None:
    """``NotEnrolled`` naming the device and ``what`` it cannot do before enrolling."""
    meta = store.get_meta(db)
    if meta.credential is None:
        raise NotEnrolled(
            f"device {meta.device_name!r} is not enrolled; it cannot {what} "
            "before it enrolls with a code"
        )


def enroll(db: Database, cloud: Callable[[], CloudClient], code: str) -> str:
    """Enroll with a one-time code through ``cloud()``; returns the device id."""
    meta = store.get_meta(db)
    if meta.device_id is not None:
        raise AlreadyEnrolled(
            f"device {meta.device_name!r} is already enrolled as {meta.device_id} "
            f"in space {meta.space_id}"
        )
    client = cloud()
    public_key = keys.public_key_bytes(keys.load_private_key(meta.private_key))
    try:
        request = EnrollRequest(code=code, device_name=meta.device_name, public_key=public_key)
    except ValidationError as exc:
        raise invalid("enrollment", meta.device_name, exc) from exc
    response = client.post("/v1/enroll", request, EnrollResponse, auth=False)
    with db.atomic():
        store.set_enrollment(
            db,
            device_id=response.device_id,
            space_id=response.space_id,
            credential=response.credential,
            cloud_url=client.base_url,
        )
        if response.account_key is not None:
            store.set_account_key(db, response.account_key)
    client.credential = response.credential
    return response.device_id


def register_account(
    db: Database,
    cloud: Callable[[], CloudClient],
    revocable: Callable[[], AbstractContextManager[None]],
    account_passphrase: str,
) -> None:
    """Derive the account key (passphrase + space id) and register it with the cloud;
    a key already registered must match (else the passphrase is wrong)."""
    meta = store.get_meta(db)
    if meta.space_id is None or meta.credential is None:
        raise NotEnrolled(
            f"device {meta.device_name!r} is not enrolled; the account key needs the "
            "space id, so enroll first"
        )
    if not account_passphrase:
        raise Refused(RefusalCode.STRONG_AUTH_REQUIRED.value, "the account passphrase is empty")
    if meta.account_key is not None:
        account.signing_key(account_passphrase, meta.space_id, meta.account_key)
        return  # already registered, and the passphrase matches it
    derived = strongauth.account_verify_key(account_passphrase, meta.space_id)
    try:
        with revocable():
            response = cloud().post(
                "/v1/account-key", AccountKeyRequest(account_key=derived), AccountKeyResponse
            )
    except AccountKeyMismatch as exc:
        raise Refused(
            RefusalCode.STRONG_AUTH_REQUIRED.value,
            f"the account passphrase does not match the account key already "
            f"registered for space {meta.space_id}; nothing was stored",
        ) from exc
    with db.atomic():
        store.set_account_key(db, response.account_key)
