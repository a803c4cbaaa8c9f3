"""Device keys: the X25519 key pair and per-item data keys (DEKs).

Invariants:
- The device's private key lives only inside the SQLCipher database (``meta``).
- Every sealed item (record version, episode) gets its own fresh random DEK and
  nonce from the injected ``random_bytes``; content is sealed with
  ``protocol.sealing`` bound to (space, kind, id, version).
- A DEK from the cloud arrives sealed to this device's public key (libsodium sealed
  box) and is opened only with this device's private key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, SealedBox

from protocol.ids import make_id
from protocol.sealing import KEY_BYTES, NONCE_BYTES, binding, open_sealed, seal

RandomBytes = Callable[[int], bytes]


def new_private_key(random_bytes: RandomBytes) -> PrivateKey:
    return PrivateKey(random_bytes(32))


def load_private_key(raw: bytes) -> PrivateKey:
    return PrivateKey(raw)


def private_key_bytes(key: PrivateKey) -> bytes:
    return bytes(key)


def public_key_bytes(key: PrivateKey) -> bytes:
    return bytes(key.public_key)


class SealedKeyDoesNotOpen(Exception):
    pass


def open_sealed_key(private_key: PrivateKey, sealed_key: bytes) -> bytes:
    """Open a DEK the cloud sealed to this device's public key."""
    try:
        dek = SealedBox(private_key).decrypt(sealed_key)
    except CryptoError as exc:
        raise SealedKeyDoesNotOpen(
            "the data key was not sealed to this device's public key, or was tampered"
        ) from exc
    if len(dek) != KEY_BYTES:
        raise SealedKeyDoesNotOpen(f"a data key is {KEY_BYTES} bytes, got {len(dek)}")
    return dek


def open_sealed_answer(private_key: PrivateKey, sealed: bytes) -> bytes:
    """Open an answer the cloud sealed to this device's public key (``/v1/recall``)."""
    try:
        return bytes(SealedBox(private_key).decrypt(sealed))
    except CryptoError as exc:
        raise SealedKeyDoesNotOpen(
            "the answer was not sealed to this device's public key, or was tampered"
        ) from exc


@dataclass(frozen=True, slots=True)
class SealedItem:
    key_id: str
    dek: bytes
    sealed: bytes


def seal_new(
    random_bytes: RandomBytes, space: str, kind: str, item_id: str, version: int, plain: bytes
) -> SealedItem:
    """Seal ``plain`` under a fresh DEK with a fresh nonce."""
    dek = random_bytes(KEY_BYTES)
    nonce = random_bytes(NONCE_BYTES)
    key_id = make_id("key", random_bytes(16))
    sealed = seal(dek, nonce, plain, binding(space, kind, item_id, version))
    return SealedItem(key_id=key_id, dek=dek, sealed=sealed)


def open_item(
    dek: bytes, sealed: bytes, space: str, kind: str, item_id: str, version: int
) -> bytes:
    return open_sealed(dek, sealed, binding(space, kind, item_id, version))
