"""The account key on the device: checking the account passphrase and signing a
mass-forget proof (``protocol.strongauth``).

Invariants:
- The device stores only the account's public verify key (from enrollment or its
  registration), never the passphrase or the signing key.
- A passphrase is accepted only if the key derived from it and the enrolled space id
  equals the stored verify key; with no stored key, strong authentication is refused.
- A proof binds space, op id and area, so it is made per operation.
"""

from __future__ import annotations

import hmac

from nacl.signing import SigningKey

from device.errors import Refused
from protocol import strongauth
from protocol.operations import RefusalCode

_CODE = RefusalCode.STRONG_AUTH_REQUIRED.value


def signing_key(passphrase: str, space_id: str | None, account_key: bytes | None) -> SigningKey:
    """The account signing key, after checking the passphrase against the stored key."""
    if space_id is None or account_key is None:
        raise Refused(
            _CODE,
            "no account key is set on this device: set one with 'memsync device "
            "account-key set' (strong authentication cannot be checked without it)",
        )
    if not passphrase:
        raise Refused(_CODE, "the account passphrase is empty")
    key = strongauth.account_signing_key(passphrase, space_id)
    if not hmac.compare_digest(bytes(key.verify_key), account_key):
        raise Refused(
            _CODE, f"the account passphrase is wrong for space {space_id}; nothing was changed"
        )
    return key


def proof(key: SigningKey, space_id: str, op_id: str, area: str | None) -> bytes:
    return strongauth.prove(key, space_id, op_id, area)
