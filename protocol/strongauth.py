"""Strong authentication for mass forgets and for deleting the account: an account key
derived from a passphrase.

Invariants: the cloud stores only the account's public verify key; a proof is a
signature over a challenge that binds space, op id and area, so it cannot be replayed
for another op, another area or another space. A proof for deleting the account binds
space and request id under its own challenge prefix, so no forget proof can delete an
account and no deletion proof can forget. Salt and cost are fixed per space, so every
device derives the same key from the same passphrase. Changing the passphrase replaces
the key: a change is proved by the current key AND the new one over one challenge that
binds space, request id and the new key, so a proof can neither install another key nor
be replayed for another space.
"""

from __future__ import annotations

import hashlib

from nacl.exceptions import BadSignatureError
from nacl.pwhash import argon2id
from nacl.signing import SigningKey, VerifyKey

OPSLIMIT = argon2id.OPSLIMIT_INTERACTIVE
MEMLIMIT = argon2id.MEMLIMIT_INTERACTIVE


def account_salt(space_id: str) -> bytes:
    return hashlib.sha256(f"memsync/1|account|{space_id}".encode()).digest()[: argon2id.SALTBYTES]


def account_signing_key(passphrase: str, space_id: str) -> SigningKey:
    if not passphrase:
        raise ValueError("an account passphrase cannot be empty")
    seed = argon2id.kdf(32, passphrase.encode(), account_salt(space_id), OPSLIMIT, MEMLIMIT)
    return SigningKey(seed)


def account_verify_key(passphrase: str, space_id: str) -> bytes:
    return bytes(account_signing_key(passphrase, space_id).verify_key)


def challenge(space_id: str, op_id: str, area: str | None) -> bytes:
    return f"memsync/1|forget_area|{space_id}|{op_id}|{area or '*all*'}".encode()


def prove(key: SigningKey, space_id: str, op_id: str, area: str | None) -> bytes:
    return key.sign(challenge(space_id, op_id, area)).signature


def verify(verify_key: bytes, proof: bytes, space_id: str, op_id: str, area: str | None) -> bool:
    try:
        VerifyKey(verify_key).verify(challenge(space_id, op_id, area), proof)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


def export_challenge(space_id: str, export_id: str, include_sensitive: bool) -> bytes:
    """What an export proof signs: the space, the one export and whether it carries the
    sensitive classes (a proof for a package without them cannot start one with them)."""
    part = "with-sensitive" if include_sensitive else "without-sensitive"
    return f"memsync/1|export|{space_id}|{export_id}|{part}".encode()


def prove_export(key: SigningKey, space_id: str, export_id: str, include_sensitive: bool) -> bytes:
    return key.sign(export_challenge(space_id, export_id, include_sensitive)).signature


def verify_export(
    verify_key: bytes, proof: bytes, space_id: str, export_id: str, include_sensitive: bool
) -> bool:
    try:
        challenge = export_challenge(space_id, export_id, include_sensitive)
        VerifyKey(verify_key).verify(challenge, proof)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


# --- deleting the account -------------------------------------------------------------


def delete_account_challenge(space_id: str, request_id: str) -> bytes:
    return f"memsync/1|delete_account|{space_id}|{request_id}".encode()


def prove_delete_account(key: SigningKey, space_id: str, request_id: str) -> bytes:
    return key.sign(delete_account_challenge(space_id, request_id)).signature


def verify_delete_account(verify_key: bytes, proof: bytes, space_id: str, request_id: str) -> bool:
    try:
        VerifyKey(verify_key).verify(delete_account_challenge(space_id, request_id), proof)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


# --- changing the account passphrase ---------------------------------------------------


def change_key_challenge(space_id: str, request_id: str, new_key: bytes) -> bytes:
    return f"memsync/1|change_account_key|{space_id}|{request_id}|{new_key.hex()}".encode()


def prove_change_key(key: SigningKey, space_id: str, request_id: str, new_key: bytes) -> bytes:
    """A signature over the change challenge: made with the current key (the proof) and
    with the new key (the new key's owner asks for it)."""
    return key.sign(change_key_challenge(space_id, request_id, new_key)).signature


def verify_change_key(
    verify_key: bytes, proof: bytes, space_id: str, request_id: str, new_key: bytes
) -> bool:
    try:
        VerifyKey(verify_key).verify(change_key_challenge(space_id, request_id, new_key), proof)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True
