"""Sealed content: the one AEAD format device and cloud both read and write.

Invariants: every piece of content has its own data key (DEK); the associated data
binds space, kind, id and version, so a ciphertext moved to another record, space or
version does not open. The caller hands in the nonce (no randomness is made here).
Format: ``nonce (24 bytes) || XChaCha20-Poly1305 ciphertext and tag``.
"""

from __future__ import annotations

from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_decrypt,
    crypto_aead_xchacha20poly1305_ietf_encrypt,
)
from nacl.exceptions import CryptoError

from protocol.errors import SealError

KEY_BYTES = 32
NONCE_BYTES = 24


def binding(space: str, kind: str, item_id: str, version: int) -> bytes:
    """Associated data for one sealed item."""
    return f"memsync/1|{space}|{kind}|{item_id}|{version}".encode()


def seal(key: bytes, nonce: bytes, plaintext: bytes, associated: bytes) -> bytes:
    if len(key) != KEY_BYTES:
        raise SealError(f"a data key is {KEY_BYTES} bytes, got {len(key)}")
    if len(nonce) != NONCE_BYTES:
        raise SealError(f"a nonce is {NONCE_BYTES} bytes, got {len(nonce)}")
    return nonce + crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, associated, nonce, key)


def open_sealed(key: bytes, sealed: bytes, associated: bytes) -> bytes:
    if len(key) != KEY_BYTES:
        raise SealError(f"a data key is {KEY_BYTES} bytes, got {len(key)}")
    if len(sealed) < NONCE_BYTES + 16:
        raise SealError(f"sealed content is too short ({len(sealed)} bytes)")
    nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
    try:
        return crypto_aead_xchacha20poly1305_ietf_decrypt(body, associated, nonce, key)
    except CryptoError as exc:
        raise SealError(
            f"content bound to {associated.decode(errors='replace')!r} does not open with this "
            "key: wrong key, wrong binding, or tampered"
        ) from exc
