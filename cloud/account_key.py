"""Changing a space's account key: the user changed the account passphrase.

Invariants:
- The key is replaced only when the request's ``proof`` verifies against the key
  registered now AND ``new_proof`` against the new key, both over
  ``protocol.strongauth.change_key_challenge(space, request id, new key)``; then, in
  the same locked transaction, the old key is gone: every later proof by it (a forget,
  an export, deleting the account, another change) is refused.
- A space with no account key has nothing to change (registering is
  ``POST /v1/account-key``); a new key equal to the current one is refused.
- The same request again after it took effect (a lost answer, retried) answers the
  same: the new key is current and its ``new_proof`` verifies. Nothing is wrapped by
  the account key, so nothing else is rewritten: it only ever verifies signatures.
- Every refusal names the space and the request id and says nothing was changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloud.errors import MalformedRequest, StrongAuthRequired
from cloud.store.base import RecordStore, StoreSession
from protocol.messages import AccountKeyChangeRequest, AccountKeyResponse
from protocol.strongauth import verify_change_key

ACCOUNT_KEY_BYTES = 32  # an Ed25519 verify key

Enrolled = Callable[[StoreSession, str, str], Any]


def change_account_key(
    store: RecordStore,
    enrolled: Enrolled,
    space_id: str,
    device_id: str,
    req: AccountKeyChangeRequest,
) -> AccountKeyResponse:
    """Replace the space's account key by ``req.account_key`` (see the invariants)."""
    new = req.account_key
    if len(new) != ACCOUNT_KEY_BYTES:
        raise MalformedRequest(
            f"field 'account_key': an Ed25519 verify key is {ACCOUNT_KEY_BYTES} bytes, "
            f"got {len(new)}"
        )
    where = f"account key change {req.request_id} for space {space_id}"
    with store.session(space_id, lock=True) as s:
        enrolled(s, space_id, device_id)
        current = s.account_key(space_id)
        if current is None:
            raise StrongAuthRequired(
                f"{where}: the space has no account key to change; register one first "
                "(POST /v1/account-key); nothing was changed"
            )
        if not verify_change_key(new, req.new_proof, space_id, req.request_id, new):
            raise StrongAuthRequired(
                f"{where}: the new key's proof does not verify (it was not made with the "
                "new passphrase for this request); nothing was changed"
            )
        if current == new:
            if verify_change_key(new, req.proof, space_id, req.request_id, new):
                raise StrongAuthRequired(
                    f"{where}: the new passphrase gives the account key already set; "
                    "choose another one (nothing was changed)"
                )
            return AccountKeyResponse(account_key=new)  # done before: the same answer
        if not verify_change_key(current, req.proof, space_id, req.request_id, new):
            raise StrongAuthRequired(
                f"{where}: the proof does not verify against the space's current account "
                "key (the current passphrase is wrong, or it was already changed on another "
                "device); nothing was changed"
            )
        if not s.replace_account_key(space_id, current, new):  # pragma: no cover - locked
            raise StrongAuthRequired(f"{where}: the account key changed meanwhile; try again")
    return AccountKeyResponse(account_key=new)
