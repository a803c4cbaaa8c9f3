"""Changing the account passphrase from this device, and learning on another device
that it was changed (issue 23 item 3).

Invariants:
- A change needs the current passphrase, checked against the stored key first
  (``device.account.signing_key``): a wrong one sends nothing. The new passphrase must
  differ and not be empty.
- Nothing on the device or in the cloud is encrypted under the account key (it only
  signs: forget-area and deletion proofs, export proofs and package signatures), so a
  change re-wraps nothing: the cloud swaps the verify key (``cloud.account_key``) and
  this device stores the new one only after the cloud said so. A crash in between
  leaves the old key here; changing again (current: the old passphrase) or setting
  the new one (``learn``) completes it, since the cloud answers a done change again.
- A queued forget of an area carries a proof by the current key, which the cloud
  would refuse once the key changed: the change is refused while one is queued.
- Another device of the account keeps the old key until its user enters the new
  passphrase there (``learn``: the cloud confirms it is the space's key now); until
  then the old passphrase passes its local check and the cloud refuses the proof.
- Export packages written before a change stay readable as they are (plain JSON and
  Markdown; their signature still verifies, by the old key); importing one back reads
  it as "signed by another account", so it needs ``--unsigned-ok``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from device import account, store
from device.db import Database
from device.errors import AccountKeyMismatch, NotEnrolled, Refused
from protocol import strongauth
from protocol.ids import make_id
from protocol.messages import AccountKeyChangeRequest, AccountKeyRequest, AccountKeyResponse
from protocol.operations import RefusalCode

if TYPE_CHECKING:
    from device.client import CloudClient

CHANGE_PATH = "/v1/account-key/change"
_CODE = RefusalCode.STRONG_AUTH_REQUIRED.value

RandomBytes = Callable[[int], bytes]


@dataclass(frozen=True, kw_only=True)
class KeyChange:
    """A change the cloud accepted: the space, the request, the new verify key."""

    space_id: str
    request_id: str
    account_key: bytes


def _space(db: Database, what: str) -> str:
    meta = store.get_meta(db)
    if meta.space_id is None or meta.credential is None:
        raise NotEnrolled(
            f"device {meta.device_name!r} is not enrolled; {what} needs the cloud, so enroll first"
        )
    return meta.space_id


def _queued_area_forgets(db: Database) -> int:
    return int(db.one("SELECT count(*) FROM op_queue WHERE kind = 'forget_area'")[0])


def change(
    db: Database,
    cloud: Callable[[], CloudClient],
    current: str,
    new: str,
    *,
    random_bytes: RandomBytes,
) -> KeyChange:
    """Change the account passphrase from ``current`` to ``new`` (see the invariants)."""
    space_id = _space(db, "changing the account passphrase")
    key = account.signing_key(current, space_id, store.get_meta(db).account_key)
    if not new:
        raise Refused(_CODE, "the new account passphrase is empty; nothing was changed")
    if new == current:
        raise Refused(_CODE, "the new account passphrase is the current one; nothing was changed")
    waiting = _queued_area_forgets(db)
    if waiting:
        raise Refused(
            _CODE,
            f"{waiting} forget(s) of a whole area wait to be sent, proved with the current "
            "passphrase; run 'memsync device sync' first (nothing was changed)",
        )
    new_key = strongauth.account_signing_key(new, space_id)
    new_verify = bytes(new_key.verify_key)
    request_id = make_id("req", random_bytes(16))
    request = AccountKeyChangeRequest(
        request_id=request_id,
        account_key=new_verify,
        proof=strongauth.prove_change_key(key, space_id, request_id, new_verify),
        new_proof=strongauth.prove_change_key(new_key, space_id, request_id, new_verify),
    )
    answer = cloud().post(CHANGE_PATH, request, AccountKeyResponse)
    if answer.account_key != new_verify:  # pragma: no cover - the cloud answers the key
        raise Refused(
            _CODE,
            f"the cloud answered another account key for change {request_id}; nothing "
            "was stored on this device",
        )
    with db.atomic():
        store.set_account_key(db, new_verify)
    return KeyChange(space_id=space_id, request_id=request_id, account_key=new_verify)


def learn(db: Database, cloud: Callable[[], CloudClient], passphrase: str) -> bool:
    """Take the key of ``passphrase`` as this device's account key when the cloud says
    it is the space's key now (it was changed on another device); True when it was
    learnt, False when it already was this device's key. A passphrase that is neither
    is refused (``strong_auth_required``) and nothing is stored."""
    space_id = _space(db, "checking the account passphrase")
    if not passphrase:
        raise Refused(_CODE, "the account passphrase is empty")
    stored = store.get_meta(db).account_key
    derived = strongauth.account_verify_key(passphrase, space_id)
    if stored == derived:
        return False
    try:
        answer = cloud().post(
            "/v1/account-key", AccountKeyRequest(account_key=derived), AccountKeyResponse
        )
    except AccountKeyMismatch as exc:
        raise Refused(
            _CODE,
            f"the account passphrase is wrong for space {space_id}: it is neither this "
            "device's account key nor the one the cloud holds now; nothing was changed",
        ) from exc
    with db.atomic():
        store.set_account_key(db, answer.account_key)
    return True
